// oauth.mjs signs a user in to a capgate MCP endpoint that has auth.oauth
// on, with the official TypeScript SDK client's OAuth support, headless,
// and prints what it saw as one JSON object on stdout. The Go test
// TestTypeScriptClientOAuth runs it against the real binary and a real
// authorization server whose login page approves every request as the
// user the test names, and asserts on the output.
//
//   node oauth.mjs --url http://127.0.0.1:8080/api/v1/mcp \
//     --client-id ts-agent --redirect http://127.0.0.1:1/callback
//
// Steps:
//  1. connect with an OAuthClientProvider (a pre-registered public client)
//     and no token: the SDK meets capgate's 401, reads the protected
//     resource metadata, discovers the authorization server and hands the
//     provider an authorization URL (PKCE S256, resource indicator);
//  2. play the user's browser: follow that URL's redirects up to the
//     redirect URI, which is never served, and take the code from it;
//  3. finishAuth(code): the SDK exchanges the code (with the verifier and
//     the resource) for an access token;
//  4. connect again with the token: list the tools, call booking.list and
//     cancel the user's first booking not yet cancelled.
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    'client-id': { type: 'string' },
    redirect: { type: 'string' },
  },
});
for (const name of ['url', 'client-id', 'redirect']) {
  if (!args[name]) {
    console.error(`oauth.mjs: --${name} is required`);
    process.exit(2);
  }
}

// provider keeps the client's OAuth state in memory: a client registered
// with the authorization server beforehand (a public client: PKCE, no
// secret), its tokens and its PKCE verifier.
class Provider {
  constructor() {
    this.authorizationUrl = undefined;
  }
  get redirectUrl() {
    return args.redirect;
  }
  get clientMetadata() {
    return {
      client_name: 'capgate-e2e-ts',
      redirect_uris: [args.redirect],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  state() {
    return 'st-' + Math.random().toString(36).slice(2);
  }
  clientInformation() {
    return { client_id: args['client-id'] };
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url) {
    this.authorizationUrl = new URL(url);
  }
  saveCodeVerifier(v) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
}

// seen records every answer of capgate to the client, and what the
// client asked the authorization server, through the transport's fetch.
const seen = { challenges: [], statuses: [], tokenRequests: [] };
async function recordingFetch(url, init) {
  const res = await fetch(url, init);
  const u = String(url);
  if (u.startsWith(args.url)) {
    seen.statuses.push(res.status);
    const h = res.headers.get('www-authenticate');
    if (h) seen.challenges.push(h);
  }
  if (init?.method === 'POST' && init.body instanceof URLSearchParams) {
    seen.tokenRequests.push(Object.fromEntries(init.body));
  } else if (init?.method === 'POST' && typeof init?.body === 'string' && !u.startsWith(args.url)) {
    seen.tokenRequests.push(Object.fromEntries(new URLSearchParams(init.body)));
  }
  return res;
}

function transport(provider) {
  return new StreamableHTTPClientTransport(new URL(args.url), { authProvider: provider, fetch: recordingFetch });
}

// browse follows url's redirects as a browser would, stopping at the
// redirect URI, and returns that URL.
async function browse(url) {
  let at = url;
  for (let i = 0; i < 10; i++) {
    if (at.href.startsWith(args.redirect)) return at;
    const res = await fetch(at, { redirect: 'manual' });
    const loc = res.headers.get('location');
    if (res.status < 300 || res.status >= 400 || !loc) {
      throw new Error(`the authorization server answered ${res.status} at ${at.pathname}: ${await res.text()}`);
    }
    at = new URL(loc, at);
  }
  throw new Error('too many redirects');
}

function payload(result) {
  if (result.structuredContent !== undefined) return result.structuredContent;
  const text = result.content?.find((c) => c.type === 'text')?.text;
  try {
    return text === undefined ? null : JSON.parse(text);
  } catch {
    return text;
  }
}

const out = {};
const provider = new Provider();
let client = new Client({ name: 'capgate-e2e-ts-oauth', version: '0.0.0' });
try {
  await client.connect(transport(provider));
  out.connectedWithoutSignIn = true;
} catch (err) {
  if (!(err instanceof UnauthorizedError)) throw err;
}
if (!provider.authorizationUrl) throw new Error('the SDK asked for no sign-in');
const q = provider.authorizationUrl.searchParams;
out.authorization = {
  endpoint: provider.authorizationUrl.origin + provider.authorizationUrl.pathname,
  resource: q.get('resource'),
  scope: q.get('scope'),
  codeChallengeMethod: q.get('code_challenge_method'),
  hasCodeChallenge: !!q.get('code_challenge'),
  clientId: q.get('client_id'),
};

const back = await browse(provider.authorizationUrl);
const code = back.searchParams.get('code');
if (!code) throw new Error(`redirected without a code: ${back.search}`);
const t = transport(provider);
await t.finishAuth(code);
out.tokenType = provider.saved?.token_type;
out.tokenRequest = seen.tokenRequests.find((r) => r.grant_type === 'authorization_code') ?? null;
if (out.tokenRequest) {
  out.tokenRequest = { resource: out.tokenRequest.resource, hasVerifier: !!out.tokenRequest.code_verifier };
}

client = new Client({ name: 'capgate-e2e-ts-oauth', version: '0.0.0' });
await client.connect(transport(provider));
out.tools = (await client.listTools()).tools.map((tl) => tl.name).sort();
const list = payload(await client.callTool({ name: 'booking.list', arguments: {} }));
out.bookings = (list?.bookings ?? []).map((b) => ({ id: b.id, status: b.status }));
const own = out.bookings.find((b) => b.status !== 'cancelled');
if (own) {
  const res = await client.callTool({ name: 'booking.cancel', arguments: { id: own.id } });
  out.cancel = { id: own.id, isError: !!res.isError, data: payload(res) };
}
out.challenges = seen.challenges;
out.statuses = seen.statuses;
await client.close();
console.log(JSON.stringify(out));
