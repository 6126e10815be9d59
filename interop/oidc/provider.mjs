// A real OAuth 2.1 authorization server for agentwire's end-to-end tests:
// oidc-provider (the certified OpenID provider, pinned in ../package.json)
// with resource indicators (RFC 8707), PKCE S256, a native public client
// with a loopback redirect, a confidential client for the resource
// server's introspection, and login and consent approved without a user.
//
// It listens on 127.0.0.1 and prints one line on stdout once it accepts
// connections:
//
//   listening http://127.0.0.1:PORT
//
// which is also the issuer. It exits when its standard input ends, so a
// test that dies takes it along.
//
// Configuration, from the environment:
//
//   OIDC_PORT          the port (0 or unset: one the system picks)
//   MCP_RESOURCE       the resource tokens are for when a request names none (required)
//   EXTRA_RESOURCES    more resources tokens may be issued for, space-separated
//   OPAQUE_RESOURCES   resources (of the above) whose access tokens are opaque,
//                      for introspection; the others get JWT access tokens (RFC 9068)
//   AT_FORMAT          "opaque" makes every access token opaque
//   ACCESS_TOKEN_TTL   access token lifetime in seconds (default 300)
//   RESOURCE_SCOPES    the scopes a resource grants (default "mcp:read mcp:write")
//   CLIENT_ID          the public client (default "agentwire-cli")
//   RS_CLIENT_ID, RS_CLIENT_SECRET
//                      the resource server's credentials for introspection
//                      (default "agentwire-rs", "rs-secret")
//
// Interaction: GET /auth redirects to /interaction/UID, which this script
// answers itself by approving the login (account "user-1") and every
// requested scope of every requested resource, and redirects to /auth/UID,
// which redirects to the client's redirect URI with code, state and iss.
// The user agent must keep the cookies of that exchange.

import http from 'node:http';
import { generateKeyPairSync } from 'node:crypto';
import Provider from 'oidc-provider';

const env = process.env;
const words = (s) => String(s || '').split(/[\s,]+/).filter(Boolean);

const RESOURCE = env.MCP_RESOURCE;
if (!RESOURCE) {
  console.error('provider.mjs: MCP_RESOURCE is required');
  process.exit(2);
}
const resources = new Set([RESOURCE, ...words(env.EXTRA_RESOURCES)]);
const opaque = new Set(words(env.OPAQUE_RESOURCES));
const ttl = Number(env.ACCESS_TOKEN_TTL || 300);
const resourceScopes = env.RESOURCE_SCOPES || 'mcp:read mcp:write';
const clientID = env.CLIENT_ID || 'agentwire-cli';
const rsClientID = env.RS_CLIENT_ID || 'agentwire-rs';
const rsClientSecret = env.RS_CLIENT_SECRET || 'rs-secret';

// The port comes first: the issuer names it.
const server = http.createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(Number(env.OIDC_PORT || 0), '127.0.0.1', resolve);
});
const issuer = `http://127.0.0.1:${server.address().port}`;

const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'k1', alg: 'ES256', use: 'sig' };

const provider = new Provider(issuer, {
  jwks: { keys: [jwk] },
  clientDefaults: { id_token_signed_response_alg: 'ES256' },
  clients: [
    {
      client_id: clientID,
      token_endpoint_auth_method: 'none',
      application_type: 'native',
      // A loopback redirect matches any port (RFC 8252 §7.3).
      redirect_uris: ['http://127.0.0.1/callback'],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    },
    {
      client_id: rsClientID,
      client_secret: rsClientSecret,
      grant_types: [],
      redirect_uris: [],
      response_types: [],
    },
  ],
  // The mcp:* scopes are the resources' (getResourceServerInfo), not
  // OpenID Connect's.
  scopes: ['openid', 'offline_access'],
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
    introspection: {
      enabled: true,
      allowedPolicy: async (ctx, client, token) => client.clientId === rsClientID || token.clientId === client.clientId,
    },
    revocation: {
      enabled: true,
      allowedPolicy: async (ctx, client, token) => token.clientId === client.clientId,
    },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => RESOURCE,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => {
        if (!resources.has(indicator)) throw new Provider.errors.InvalidTarget();
        return {
          scope: resourceScopes,
          audience: indicator,
          accessTokenTTL: ttl,
          accessTokenFormat: env.AT_FORMAT === 'opaque' || opaque.has(indicator) ? 'opaque' : 'jwt',
          jwt: { sign: { alg: 'ES256' } },
        };
      },
    },
  },
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  findAccount: async (ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
});

// Approve every interaction: the login, and the consent to whatever was asked.
provider.use(async (ctx, next) => {
  if (!/^\/interaction\/[^/]+$/.test(ctx.path)) return next();
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  const params = details.params;
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: 'user-1', clientId: params.client_id });
  const scopes = words(params.scope);
  const oidc = scopes.filter((s) => s === 'openid' || s === 'offline_access').join(' ');
  if (oidc) grant.addOIDCScope(oidc);
  const own = scopes.filter((s) => s !== 'openid' && s !== 'offline_access').join(' ');
  for (const r of [].concat(params.resource || RESOURCE)) grant.addResourceScope(r, own);
  await provider.interactionFinished(ctx.req, ctx.res,
    { login: { accountId: 'user-1' }, consent: { grantId: await grant.save() } },
    { mergeWithLastSubmission: false });
});

server.on('request', provider.callback());
process.stdout.write(`listening ${issuer}\n`);

process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
