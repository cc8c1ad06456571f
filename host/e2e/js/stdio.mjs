// stdio.mjs drives `capgate stdio` with the official TypeScript SDK's
// StdioClientTransport, as a desktop assistant does: it launches the
// command with the token in its environment (never in its arguments),
// lists the tools, calls booking.list, calls booking.cancel on a booking
// that is not the caller's (the gate's refusal) and booking.get on one
// that does not exist (a tool error), and prints what it saw as one JSON
// object on stdout, with the command's stderr. TestStdioTypeScript runs it
// against the real binary; against `make run`:
//
//   CAPGATE_TOKEN=demo-alice node stdio.mjs --capgate ../../../bin/capgate \
//     --url http://127.0.0.1:8080/api/v1/mcp --other-booking bk_...
//
// With --expect-failure it only connects, and reports the error the
// connection failed with.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';

const { values: args } = parseArgs({
  options: {
    capgate: { type: 'string' },
    url: { type: 'string' },
    'other-booking': { type: 'string' },
    'expect-failure': { type: 'boolean' },
  },
});
for (const name of ['capgate', 'url']) {
  if (!args[name]) {
    console.error(`stdio.mjs: --${name} is required`);
    process.exit(2);
  }
}
if (!process.env.CAPGATE_TOKEN) {
  console.error('stdio.mjs: CAPGATE_TOKEN must hold the token');
  process.exit(2);
}

// The SDK hands the command only a few safe variables of its own
// environment; the token is given explicitly, as a client's config does.
const transport = new StdioClientTransport({
  command: args.capgate,
  args: ['stdio', '-url', args.url],
  env: { ...getDefaultEnvironment(), CAPGATE_TOKEN: process.env.CAPGATE_TOKEN },
  stderr: 'pipe',
});
let stderr = '';
transport.stderr.on('data', (chunk) => {
  stderr += chunk.toString();
});
const client = new Client({ name: 'capgate-e2e-ts-stdio', version: '0.0.0' });

function rpcError(err) {
  if (err instanceof McpError) {
    return { code: err.code, message: err.message, data: err.data ?? null };
  }
  throw err;
}

async function call(name, toolArgs) {
  try {
    const result = await client.callTool({ name, arguments: toolArgs });
    const text = result.content?.find((c) => c.type === 'text')?.text ?? null;
    return { isError: result.isError === true, structured: result.structuredContent ?? null, text };
  } catch (err) {
    return { error: rpcError(err) };
  }
}

const out = {};
if (args['expect-failure']) {
  try {
    await client.connect(transport);
    out.connected = true;
  } catch (err) {
    out.connectError = rpcError(err);
  }
} else {
  await client.connect(transport);
  out.serverVersion = client.getServerVersion() ?? null;
  out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
  out.list = await call('booking.list', {});
  if (args['other-booking']) {
    out.refusal = await call('booking.cancel', { id: args['other-booking'] });
  }
  out.toolError = await call('booking.get', { id: 'bk_doesnotexist' });
  // What `ps` shows of the running command.
  out.argv = readFileSync(`/proc/${transport.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
}
// close() ends the command's stdin and waits for it to exit, its stderr
// read to the end.
const proc = transport._process;
await client.close();
out.exitCode = proc?.exitCode ?? null;
out.stderr = stderr;
process.stdout.write(JSON.stringify(out, null, 2) + '\n');
