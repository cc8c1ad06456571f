// client.mjs drives a running capgate MCP endpoint with the official
// TypeScript SDK client and prints what it saw as one JSON object on stdout,
// with a "checks" object of the outcomes it expects. It exits 1 when a check
// fails, and non-zero with the error on stderr when the session itself
// breaks. The Go test TestTypeScriptClient runs it against the real binary
// and asserts on the whole output; against `make run` it works as is:
//
//   node client.mjs --url http://127.0.0.1:8080/api/v1/mcp \
//     --token demo-alice --other-token demo-bob
//
// Steps, all over StreamableHTTPClientTransport with the bearer token sent
// through requestInit headers:
//  1. connect as --token, list the tools;
//  2. call booking.list and pick the caller's first booked booking;
//  3. call booking.cancel on it;
//  4. connect as --other-token, call booking.list to learn one of its
//     bookings, then (as --token again) call booking.cancel on that one and
//     record the MCP error (code, message, data);
//  5. (as --token) the catalogue: list the resource templates, list the
//     resources across every page (following nextCursor), read the record
//     capgate://booking.resource/room-aurora, and call platform.search for
//     "aurora";
//  6. (as --token) list the prompts, complete booking.plan_visit's booking
//     argument (the caller's active bookings) and get the prompt for the
//     first suggestion.
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    token: { type: 'string' },
    'other-token': { type: 'string' },
  },
});
for (const name of ['url', 'token', 'other-token']) {
  if (!args[name]) {
    console.error(`client.mjs: --${name} is required`);
    process.exit(2);
  }
}

async function connect(token) {
  const client = new Client({ name: 'capgate-e2e-ts', version: '0.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(args.url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return { client, transport };
}

// payload returns a tool result's structured content, or the JSON in its
// first text block when the server sent none.
function payload(result) {
  if (result.structuredContent !== undefined) return result.structuredContent;
  const text = result.content?.find((c) => c.type === 'text')?.text;
  try {
    return text === undefined ? null : JSON.parse(text);
  } catch {
    return text;
  }
}

// call records a tools/call outcome either as a result or as the JSON-RPC
// error the SDK raised for it.
async function call(client, name, args) {
  try {
    const result = await client.callTool({ name, arguments: args });
    return { isError: result.isError === true, data: payload(result) };
  } catch (err) {
    if (err instanceof McpError) {
      return { error: { code: err.code, message: err.message, data: err.data ?? null } };
    }
    throw err;
  }
}

const out = {};
const me = await connect(args.token);
out.serverVersion = me.client.getServerVersion() ?? null;
out.protocolVersion = me.transport.protocolVersion ?? null;
out.tools = (await me.client.listTools()).tools.map((t) => t.name).sort();

out.list = await call(me.client, 'booking.list', {});
const mine = out.list.data?.bookings?.find((b) => b.status !== 'cancelled');
out.ownBookingId = mine?.id ?? null;
if (mine) {
  out.cancelOwn = await call(me.client, 'booking.cancel', { id: mine.id });
}

const other = await connect(args['other-token']);
const theirs = (await call(other.client, 'booking.list', {})).data?.bookings?.[0];
out.otherBookingId = theirs?.id ?? null;
await other.client.close();
if (theirs) {
  out.cancelOther = await call(me.client, 'booking.cancel', { id: theirs.id });
}

const recordTemplate = 'capgate://booking.resource/{id}';
const recordURI = 'capgate://booking.resource/room-aurora';
out.resourceTemplates = (await me.client.listResourceTemplates()).resourceTemplates;
out.resources = [];
out.resourcePages = 0;
let cursor;
do {
  const page = await me.client.listResources(cursor === undefined ? {} : { cursor });
  out.resourcePages++;
  out.resources.push(...page.resources);
  cursor = page.nextCursor;
} while (cursor && out.resourcePages < 1000);
out.readResource = await me.client.readResource({ uri: recordURI });
out.search = await call(me.client, 'platform.search', { query: 'aurora' });
out.prompts = (await me.client.listPrompts()).prompts.map((p) => p.name);
out.completion = (await me.client.complete({
  ref: { type: 'ref/prompt', name: 'booking.plan_visit' },
  argument: { name: 'booking', value: 'bk_' },
})).completion;
const planned = out.completion.values[0];
out.prompt = planned === undefined ? null
  : await me.client.getPrompt({ name: 'booking.plan_visit', arguments: { booking: planned } });
await me.client.close();

const uris = out.resources.map((r) => r.uri);
let record = null;
try {
  record = JSON.parse(out.readResource.contents?.[0]?.text);
} catch {}
out.checks = {
  listedOwnBookings: Array.isArray(out.list.data?.bookings) && out.list.data.bookings.length > 0,
  cancelledOwnBooking: out.cancelOwn?.isError === false && out.cancelOwn.data?.status === 'cancelled',
  ownershipRefused: out.cancelOther?.error?.code === -32003 && out.cancelOther.error.data?.step === 'ownership',
  oneRecordTemplate: out.resourceTemplates.length === 1 && out.resourceTemplates[0].uriTemplate === recordTemplate,
  listedEveryResourceOnce: !cursor && uris.includes(recordURI) && new Set(uris).size === uris.length,
  readRecord: out.readResource.contents?.length === 1 && out.readResource.contents[0].uri === recordURI &&
    out.readResource.contents[0].mimeType === 'application/json' && record?.id === 'room-aurora',
  searchFoundRecord: out.search.isError === false && out.search.data?.hits?.[0]?.id === 'room-aurora',
  listedPlanVisit: out.prompts.includes('booking.plan_visit'),
  // The booking cancelled above is no longer suggested; the other one is.
  completedActiveBookings: out.completion.values.length > 0 &&
    out.completion.values.every((id) => id.startsWith('bk_') && id !== out.ownBookingId),
  gotPlanVisit: out.prompt?.messages?.length === 2 && out.prompt.messages[1].content.type === 'text' &&
    out.prompt.messages[1].content.text.includes(planned),
};
process.stdout.write(JSON.stringify(out, null, 2) + '\n');
process.exitCode = Object.values(out.checks).every(Boolean) ? 0 : 1;
