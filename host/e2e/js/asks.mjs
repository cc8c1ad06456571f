// asks.mjs calls the conformance plugin's fixtures that ask their client
// mid-call (test_elicitation, test_sampling) with the official TypeScript
// SDK client, which answers capgate's requests on the call's event stream
// with its request handlers, and prints, as one JSON object on stdout, what
// it was asked and what each call answered; then the same call from a
// client that declared no elicitation. TestPluginAsksTypeScript runs it
// against the real binary:
//
//   node asks.mjs --url http://127.0.0.1:8080/api/v1/mcp --token demo-alice
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const { values: args } = parseArgs({ options: { url: { type: 'string' }, token: { type: 'string' } } });
if (!args.url || !args.token) {
  console.error('asks.mjs: --url and --token are required');
  process.exit(2);
}

async function connect(capabilities) {
  const client = new Client({ name: 'capgate-e2e-ts', version: '0.0.0' }, { capabilities });
  await client.connect(new StreamableHTTPClientTransport(new URL(args.url), {
    requestInit: { headers: { Authorization: `Bearer ${args.token}` } },
  }));
  return client;
}

const text = (r) => r.content?.find((c) => c.type === 'text')?.text ?? null;

const asked = [];
const client = await connect({ elicitation: {}, sampling: {} });
client.setRequestHandler(ElicitRequestSchema, (req) => {
  asked.push(`elicit: ${req.params.message}`);
  return { action: 'accept', content: { username: 'ada', email: 'ada@example.com' } };
});
client.setRequestHandler(CreateMessageRequestSchema, (req) => {
  asked.push(`sample: ${req.params.messages[0].content.text}`);
  return { role: 'assistant', model: 'e2e-model', content: { type: 'text', text: 'Paris' }, stopReason: 'endTurn' };
});
const elicited = await client.callTool({ name: 'test_elicitation', arguments: { message: 'Who are you?' } });
const sampled = await client.callTool({ name: 'test_sampling', arguments: { prompt: 'The capital of France?' } });
const protocolVersion = client.transport?.protocolVersion ?? null;
await client.close();

const plain = await connect({});
const refused = await plain.callTool({ name: 'test_elicitation', arguments: { message: 'Who are you?' } });
await plain.close();

console.log(JSON.stringify({
  protocolVersion,
  asked,
  elicited: { text: text(elicited), isError: elicited.isError === true },
  sampled: { text: text(sampled), isError: sampled.isError === true },
  refused: { text: text(refused), isError: refused.isError === true },
}));
