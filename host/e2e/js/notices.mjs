// notices.mjs calls the conformance plugin's progress and logging fixtures
// with the official TypeScript SDK client and prints, as one JSON object on
// stdout, the progress and log notifications it heard before each result.
// TestCallNoticesTypeScript runs it against the real binary:
//
//   node notices.mjs --url http://127.0.0.1:8080/api/v1/mcp --token demo-alice
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const { values: args } = parseArgs({ options: { url: { type: 'string' }, token: { type: 'string' } } });
if (!args.url || !args.token) {
  console.error('notices.mjs: --url and --token are required');
  process.exit(2);
}

const client = new Client({ name: 'capgate-e2e-ts', version: '0.0.0' });
const logs = [];
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
  logs.push(`${n.params.level} ${n.params.data}`);
});
await client.connect(new StreamableHTTPClientTransport(new URL(args.url), {
  requestInit: { headers: { Authorization: `Bearer ${args.token}` } },
}));

const progress = [];
const withProgress = await client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined, {
  onprogress: (p) => progress.push([p.progress, p.total]),
});
const progressBeforeResult = progress.length;
await client.setLoggingLevel('debug');
const withLogging = await client.callTool({ name: 'test_tool_with_logging', arguments: {} });
await new Promise((r) => setTimeout(r, 200));

console.log(JSON.stringify({
  protocolVersion: client.transport?.protocolVersion ?? null,
  progress,
  progressBeforeResult,
  progressResultIsError: withProgress.isError === true,
  logs,
  loggingResultIsError: withLogging.isError === true,
}));
await client.close();
