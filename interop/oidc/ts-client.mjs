// An MCP client built on the official TypeScript SDK (@modelcontextprotocol/client,
// pinned in ../package.json) that authenticates on its own, with the SDK's
// OAuth support, to a protected MCP server over Streamable HTTP. Used by
// agentwire's end-to-end test (oauth/e2e) against provider.mjs.
//
// It connects with no token. The SDK gets 401, reads the protected resource
// metadata the challenge names, then the authorization server's metadata,
// uses the pre-registered native client, and starts an authorization code
// flow with PKCE S256 and the resource (RFC 8707) by calling
// redirectToAuthorization. This script is the user agent there: it follows
// the authorization server's redirects with a cookie jar (provider.mjs
// approves the login and the consent without a user) until the loopback
// redirect URI, which nothing listens on, and keeps that callback URL.
// After connect fails with UnauthorizedError it checks state and hands the
// callback's parameters to the transport's finishAuth, which checks iss
// (RFC 9207) and redeems the code; then it connects again with the token,
// lists the tools and calls TOOL without arguments.
//
// Configuration, from the environment:
//
//   MCP_URL        the MCP endpoint (required)
//   REDIRECT_URI   the loopback redirect URI (required)
//   CLIENT_ID      the pre-registered client (default "agentwire-cli")
//   TOOL           the tool to call (default "whoami")
//
// It prints one JSON line on stdout:
//
//   {"requests":[...],"tools":[...],"result":"...","protocolVersion":"..."}
//
// where requests lists every HTTP request the SDK and the user agent made,
// in order ("POST http://.../mcp 401", ...), and result is the tool's text.
// On a failure it prints {"error":"...","requests":[...]} and exits 1.

import { randomBytes } from 'node:crypto';
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';

const env = process.env;
if (!env.MCP_URL || !env.REDIRECT_URI) {
  console.error('ts-client.mjs: MCP_URL and REDIRECT_URI are required');
  process.exit(2);
}
const serverUrl = new URL(env.MCP_URL);
const redirectUri = env.REDIRECT_URI;
const clientId = env.CLIENT_ID || 'agentwire-cli';
const tool = env.TOOL || 'whoami';

const requests = [];
const note = (method, url, status, auth) => {
  const u = new URL(url);
  requests.push(`${method} ${u.origin}${u.pathname}${auth ? ' (bearer)' : ''} ${status}`);
};

// The SDK's fetch, recorded: discovery, the token request and the MCP requests.
const recordingFetch = async (input, init) => {
  const url = input instanceof Request ? input.url : String(input);
  const method = init?.method || (input instanceof Request ? input.method : 'GET');
  const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
  const res = await fetch(input, init);
  note(method, url, res.status, /^bearer /i.test(headers.get('authorization') || ''));
  return res;
};

// A cookie jar for one host, enough for the provider's interaction cookies:
// name, path and expiry honoured, domain ignored.
const jar = new Map(); // name + '\0' + path -> { name, value, path }
function keepCookies(res, url) {
  for (const line of res.headers.getSetCookie()) {
    const [pair, ...attrs] = line.split(';').map((s) => s.trim());
    const eq = pair.indexOf('=');
    const name = pair.slice(0, eq);
    const value = pair.slice(eq + 1);
    let path = '/';
    let gone = value === '';
    for (const a of attrs) {
      const [k, v = ''] = a.split('=');
      const key = k.toLowerCase();
      if (key === 'path') path = v || '/';
      else if (key === 'max-age' && Number(v) <= 0) gone = true;
      else if (key === 'expires' && Date.parse(v) <= Date.now()) gone = true;
    }
    const id = `${name}\0${path}`;
    if (gone) jar.delete(id);
    else jar.set(id, { name, value, path });
  }
}
function cookiesFor(url) {
  const p = new URL(url).pathname;
  return [...jar.values()]
    .filter((c) => p === c.path || p.startsWith(c.path.endsWith('/') ? c.path : c.path + '/'))
    .map((c) => `${c.name}=${c.value}`)
    .join('; ');
}

// The user agent: follows the redirects from the authorization URL until the
// redirect URI, and returns that URL.
async function userAgent(authorizationUrl) {
  let next = authorizationUrl.toString();
  for (let hops = 0; hops < 10; hops++) {
    if (next.startsWith(redirectUri + '?')) return new URL(next);
    const headers = {};
    const cookie = cookiesFor(next);
    if (cookie) headers.cookie = cookie;
    const res = await fetch(next, { redirect: 'manual', headers });
    note('GET', next, res.status, false);
    keepCookies(res, next);
    const loc = res.headers.get('location');
    if (res.status < 300 || res.status > 399 || !loc) {
      const body = (await res.text()).slice(0, 500);
      throw new Error(`GET ${next}: ${res.status}, not a redirect: ${body}`);
    }
    await res.body?.cancel();
    next = new URL(loc, next).toString();
  }
  throw new Error(`more than 10 redirects from ${authorizationUrl}, the last to ${next}`);
}

// The SDK's OAuthClientProvider, all in memory.
const store = {};
let callback;
const expectedState = randomBytes(16).toString('base64url');
const provider = {
  get redirectUrl() { return redirectUri; },
  get clientMetadata() {
    return {
      client_name: 'agentwire e2e TypeScript client',
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      application_type: 'native',
    };
  },
  state: () => expectedState,
  // Pre-registered (provider.mjs has no registration endpoint); the SDK
  // stamps it with the issuer and saves it back.
  clientInformation: () => store.client ?? { client_id: clientId },
  saveClientInformation: (info) => { store.client = info; },
  tokens: () => store.tokens,
  saveTokens: (tokens) => { store.tokens = tokens; },
  saveCodeVerifier: (v) => { store.verifier = v; },
  codeVerifier: () => store.verifier,
  saveDiscoveryState: (s) => { store.discovery = s; },
  discoveryState: () => store.discovery,
  saveResourceUrl: (r) => { store.resource = r; },
  redirectToAuthorization: async (url) => {
    store.authorizationUrl = url.toString();
    callback = await userAgent(url);
  },
};

function transport() {
  return new StreamableHTTPClientTransport(serverUrl, { authProvider: provider, fetch: recordingFetch });
}

const out = { requests };
try {
  const first = new Client({ name: 'agentwire-e2e-ts-client', version: '1.0.0' });
  const t1 = transport();
  try {
    await first.connect(t1);
    throw new Error('connected without authorizing: the server did not ask for a token');
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
  }
  if (!callback) throw new Error('UnauthorizedError without a redirect to the authorization server');
  const params = callback.searchParams;
  if (params.get('error')) throw new Error(`authorization refused: ${params.get('error')}`);
  if (params.get('state') !== expectedState) throw new Error(`state ${params.get('state')}, want ${expectedState}`);
  const authz = new URL(store.authorizationUrl).searchParams;
  out.authorization = {
    client_id: authz.get('client_id'),
    scope: authz.get('scope'),
    resource: authz.get('resource'),
    code_challenge_method: authz.get('code_challenge_method'),
    redirect_uri: authz.get('redirect_uri'),
    iss: params.get('iss'),
  };
  await t1.finishAuth(params);
  await first.close().catch(() => {});
  out.tokenType = store.tokens?.token_type;
  out.refreshToken = Boolean(store.tokens?.refresh_token);

  const client = new Client({ name: 'agentwire-e2e-ts-client', version: '1.0.0' });
  await client.connect(transport());
  out.protocolVersion = client.getNegotiatedProtocolVersion?.() ?? null;
  out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
  const res = await client.callTool({ name: tool, arguments: {} });
  if (res.isError) throw new Error(`${tool}: ${JSON.stringify(res.content)}`);
  out.result = res.content[0].text;
  await client.close();
  process.stdout.write(JSON.stringify(out) + '\n');
} catch (err) {
  out.error = err?.stack || String(err);
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(1);
}
