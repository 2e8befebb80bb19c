import fs from 'node:fs/promises'
import * as z from 'zod/mini'
import { isAccountId, isAssetId, isChainId } from '../caip/caip.js'
import { parseKey } from './secrets.js'

const PositiveInt = z.int().check(z.minimum(1))
const Decimal = z
  .string()
  .check(z.regex(/^\d+(\.\d+)?$/, 'Expected a decimal string such as "1" or "0.998".'))

const AssetConfigSchema = z.strictObject({
  symbol: z.string().check(z.minLength(1), z.maxLength(16)),
  name: z.string().check(z.minLength(1), z.maxLength(64)),
  decimals: z.int().check(z.minimum(0), z.maximum(36)),
  /** Price of one whole token in USD; stablecoins "1". */
  usdRate: z._default(Decimal, '1'),
  /** EVM option kinds: `eip3009` (gasless) and `transfer` (direct); both when omitted. */
  methods: z.optional(z.array(z.enum(['eip3009', 'transfer'])).check(z.minLength(1))),
  /** EIP-712 domain of an EIP-3009 token when the token does not expose EIP-5267. */
  eip712: z.optional(z.strictObject({ name: z.string(), version: z.string() })),
  iconUrl: z.optional(z.string()),
  /**
   * Live EVM: how a gasless payment collects the token: `eip3009` (the token's own authorization; the
   * default) or `permit2` (a Permit2 signature transfer, for tokens without EIP-3009).
   */
  transferMethod: z.optional(z.enum(['eip3009', 'permit2'])),
  /** Live EVM: share of each gasless payment kept at settlement, in basis points (default 0). */
  settlementFeeBps: z.optional(z.int().check(z.minimum(0), z.maximum(10_000))),
  /** Live Solana and EVM: offer push options (Solana Pay, EIP-681) for this asset (default true; docs/push-payments.md). */
  push: z.optional(z.boolean()),
})

const ChainConfigSchema = z
  .strictObject({
    /** The chain's node. `rpcUrls` lists several (failover; see docs/live-mode.md, "Chain reads"). */
    rpcUrl: z.optional(z.string().check(z.minLength(1))),
    /**
     * Several nodes of the chain (or a load balancer and its backends), tried in order: a node that fails
     * at the transport is skipped, and a node behind the newest block seen decides nothing.
     */
    rpcUrls: z.optional(z.array(z.string().check(z.minLength(1))).check(z.minLength(1))),
    /** EVM: 0x private key (executor, relayer, collection). Solana: base58 secret key (fee payer). */
    signerKey: z.string().check(z.minLength(1)),
    /** Display name (e.g. "Base"); derived from the chain id when omitted. */
    name: z.optional(z.string()),
    assets: z._default(
      z.record(z.string().check(z.refine(isAssetId, 'Expected a CAIP-19 asset id.')), AssetConfigSchema),
      {},
    ),
    /**
     * EVM: an executor transaction still pending after this long is replaced by one with the same nonce
     * and higher fees (default 20000 ms).
     */
    feeBumpAfterMs: z.optional(z.int().check(z.minimum(1000))),
    /**
     * EVM: blocks a transaction must have (its own included) before the payment is succeeded or its
     * settlement recorded (default 1).
     */
    confirmations: z.optional(z.int().check(z.minimum(1), z.maximum(1000))),
    /**
     * Solana: the commitment a transaction must reach before the payment is succeeded or its settlement
     * recorded (default `confirmed`; `finalized` waits for a rooted block, about 13 s more on mainnet).
     */
    commitment: z.optional(z.enum(['confirmed', 'finalized'])),
    /** EVM: the highest max fee per gas a replacement may pay, in gwei (default 500). */
    maxFeePerGasGwei: z.optional(z.number().check(z.positive())),
    /**
     * EVM: account factories an undeployed smart account may name in an ERC-6492 signature. The executor
     * deploys the account through one of these before relaying its payment; any other factory is refused.
     */
    eip6492Factories: z.optional(
      z.array(z.string().check(z.regex(/^0x[0-9a-fA-F]{40}$/, 'Expected a 0x-prefixed 20-byte address.'))),
    ),
    /**
     * EVM: how often the head is polled for a new block, ms (default 250). Receipts of everything in
     * flight are read once per new block; keep it below the block time.
     */
    blockPollMs: z.optional(z.int().check(z.minimum(10), z.maximum(60_000))),
    /** EVM: transactions the executor key keeps in flight at once (default 256); more wait their turn. */
    maxInFlight: z.optional(z.int().check(z.minimum(1), z.maximum(10_000))),
    /**
     * EVM: JSON-RPC calls made in the same event-loop turn travel as one batch of at most this many
     * (default 100); 1 sends every call alone, for a node or provider that refuses batches.
     */
    rpcBatchSize: z.optional(z.int().check(z.minimum(1), z.maximum(1000))),
    /**
     * This chain's executor fee budget per credential and window, in whole native units (ETH, SOL):
     * overrides `relays.gasBudget.perCredential` (a sum in ether means little in SOL).
     */
    gasBudgetPerCredential: z.optional(Decimal),
    /** This chain's executor fee budget per payer and window, in whole native units: overrides `relays.gasBudget.perPayer`. */
    gasBudgetPerPayer: z.optional(Decimal),
  })
  .check(
    z.refine((chain) => chain.rpcUrl !== undefined || chain.rpcUrls !== undefined, {
      message: 'Expected "rpcUrl" or "rpcUrls" (the chain\'s nodes).',
    }),
  )

/** A browser origin as the `Origin` header carries it: scheme, host, optional port; no path. */
const Origin = z
  .string()
  .check(
    z.regex(
      /^[a-z][a-z0-9+.-]*:\/\/[^/?#@\s]+$/i,
      'Expected an origin such as "https://wallet.example" (scheme, host and port only, no path).',
    ),
  )

const CorsConfigSchema = z.strictObject({
  /** Origins that may call the wallet gateway from a browser: "*" (default) or a list. */
  gateway: z.optional(z.union([z.literal('*'), z.array(Origin)])),
  /** Origins that may call the merchant API from a browser; none by default, and never "*". */
  merchant: z.optional(z.array(Origin)),
})

const ConfigFileSchema = z.strictObject({
  publicBaseUrl: z.optional(z.url({ protocol: /^https?$/ })),
  chains: z.optional(
    z.record(z.string().check(z.refine(isChainId, 'Expected a CAIP-2 chain id.')), ChainConfigSchema),
  ),
  sanctioned: z.optional(z.array(z.string().check(z.refine(isAccountId, 'Expected a CAIP-10 account id.')))),
  collectDataAtMinor: z.optional(z.nullable(z.string().check(z.regex(/^\d+$/)))),
  rateLimit: z.optional(
    z.union([
      z.literal(false),
      z.strictObject({
        perSecond: PositiveInt,
        burst: z.optional(PositiveInt),
        failedAuthPerMinute: z.optional(PositiveInt),
      }),
    ]),
  ),
  /**
   * The key that seals secrets at rest (webhook signing secrets, stored answers that carry them):
   * `env:NAME` naming 32 bytes as base64 or hex. `previousSecretsKeys` still open what an older key
   * sealed until `caipay secrets rotate` re-seals it.
   */
  secretsKey: z.optional(z.string().check(z.minLength(1))),
  previousSecretsKeys: z.optional(z.array(z.string().check(z.minLength(1)))),
  /**
   * Which proxies' `X-Forwarded-For` to believe for the client address (Fastify's `trustProxy`): the
   * proxies' addresses or CIDRs (a comma-separated string or a list), or true (every hop: only when
   * nothing can reach the server but the proxy). Default false: the socket's peer is the client.
   */
  trustProxy: z.optional(
    z.union([z.boolean(), z.string().check(z.minLength(1)), z.array(z.string().check(z.minLength(1)))]),
  ),
  idempotencyTtlSeconds: z.optional(PositiveInt),
  /**
   * What hostile payers and callers can make the executors spend (docs/security-model.md, "Relays that
   * cannot be made to waste gas").
   */
  relays: z.optional(
    z.strictObject({
      /** How long a payer whose relay failed on chain after its simulation is refused (default 900; 0: never). */
      payerCooldownSeconds: z.optional(z.int().check(z.minimum(0), z.maximum(30 * 86_400))),
      gasBudget: z.optional(
        z.strictObject({
          /** The budget's window (default 3600). */
          windowSeconds: z.optional(PositiveInt),
          /**
           * Whole native units (ETH, SOL) one credential's callers may make the executor of a chain lose
           * per window on reverted, failed and in-flight sends (default "0.1"; see `gasBudgetPerCredential`).
           */
          perCredential: z.optional(Decimal),
          /**
           * Whole native units one payer's failed and in-flight sends may cost the executor of a chain
           * per window, checked before its credential's budget (default "0.01"; see `gasBudgetPerPayer`).
           */
          perPayer: z.optional(Decimal),
        }),
      ),
    }),
  ),
  /** The job runner (live payments, settlements, webhooks). */
  jobs: z.optional(
    z.strictObject({
      /** Jobs one process runs at once (default 64); its database pool grows with it. */
      slots: z.optional(z.int().check(z.minimum(1), z.maximum(4096))),
      /**
       * A claim's lease, ms (default 10000): a worker that stops renewing (killed, paused) leaves its jobs
       * to another after this long; a paused one that resumes moves nothing (docs/live-mode.md, "Fences").
       */
      leaseMs: z.optional(z.int().check(z.minimum(1000), z.maximum(600_000))),
      /**
       * How often each worker reconciles the ledger with the chain, ms (default 60000; docs/live-mode.md,
       * "Reconciliation").
       */
      reconcileIntervalMs: z.optional(z.int().check(z.minimum(1000), z.maximum(86_400_000))),
    }),
  ),
  /** Live payments' settlements to the merchants' destinations. */
  settlement: z.optional(
    z.strictObject({
      /**
       * How long a destination's settlement batch collects payments before its one transfer is sent, ms
       * (default 5000; 0 sends each payment's settlement as soon as it succeeds, alone or with the
       * payments that succeeded with it).
       */
      intervalMs: z.optional(z.int().check(z.minimum(0), z.maximum(86_400_000))),
    }),
  ),
  /** Push payments (docs/push-payments.md). */
  push: z.optional(
    z.strictObject({
      /** What the excess of an overpaid push payment does: settles to the merchant (default) or is refunded. */
      overpaid: z.optional(z.enum(['settle', 'refund'])),
      /**
       * What arrived for a payment that closed underpaid (expired or cancelled): held for the operator
       * (default) or sent back to its sender at once.
       */
      underpaid: z.optional(z.enum(['hold', 'refund'])),
      /** How often a worker looks for transfers by the open payments' references, ms (default 1000). */
      pollMs: z.optional(z.int().check(z.minimum(100), z.maximum(600_000))),
    }),
  ),
  paymentTtlSeconds: z.optional(PositiveInt),
  /** Manual capture (docs/capture.md): how long a paid payment may be held before it is voided by itself. */
  capture: z.optional(
    z.strictObject({
      /** `captureBy` when the merchant gives none, seconds after creation (default 7 days). */
      defaultHoldSeconds: z.optional(PositiveInt),
      /** The furthest `captureBy` may be, seconds after creation (default 30 days). */
      maxHoldSeconds: z.optional(PositiveInt),
    }),
  ),
  bodyLimitBytes: z.optional(PositiveInt),
  authCacheMs: z.optional(z.int().check(z.minimum(0), z.maximum(60_000))),
  statusWaitMaxMs: z.optional(z.int().check(z.minimum(0), z.maximum(120_000))),
  fastPaths: z.optional(z.boolean()),
  sandboxRefundDelayMs: z.optional(z.int().check(z.minimum(0), z.maximum(600_000))),
  cors: z.optional(CorsConfigSchema),
  webhooks: z.optional(
    z.strictObject({
      /** Accept webhook URLs on private, loopback and other non-public addresses, in both modes. */
      allowPrivateUrls: z.optional(z.boolean()),
      /** How long one delivery attempt may take (default 10000). */
      timeoutMs: z.optional(z.int().check(z.minimum(100), z.maximum(60_000))),
    }),
  ),
})

export type AssetConfig = z.output<typeof AssetConfigSchema>
export type ChainConfig = z.output<typeof ChainConfigSchema>
/** What a config file may hold: every key optional. */
export type ConfigFile = z.input<typeof ConfigFileSchema>

/** The server's configuration with every default filled in. */
export interface ServerConfig {
  /** Where buyers reach the server: the base of `gatewayUrl` and of hosted pages. */
  publicBaseUrl: string
  /** Live-mode chains by CAIP-2 id. Empty: test mode only. */
  chains: Record<string, ChainConfig>
  /** CAIP-10 accounts refused with `451 sanctioned_user`. */
  sanctioned: string[]
  /** Payments worth at least this many USD cents ask for data collection (default USD 1,000.00); null: never. */
  collectDataAtMinor: string | null
  /**
   * Per credential (an App-Id per credential and client address); false disables. The window holds
   * `burst` requests per `burst / perSecond` s. `failedAuthPerMinute`: 401s one client address may
   * collect per minute before its unauthenticated requests are answered 429.
   */
  rateLimit: { perSecond: number; burst: number; failedAuthPerMinute: number } | false
  /** Seals secrets at rest (secrets.ts); null: stored as they are. */
  secretsKey: string | null
  /** Keys that sealed before the last rotation; they open, never seal. */
  previousSecretsKeys: string[]
  /** Fastify's `trustProxy`: whose `X-Forwarded-For` names the client address. */
  trustProxy: boolean | string | string[]
  idempotencyTtlSeconds: number
  /**
   * Bounds on what the executors spend for hostile payers (payments/relayGuards.ts): a payer whose relay
   * failed on chain is refused for `payerCooldownSeconds`; a credential's reverted, failed and in-flight
   * sends may cost at most `gasBudget.perCredential` native units per `gasBudget.windowSeconds` on a chain,
   * and one payer's at most `gasBudget.perPayer` (checked first).
   */
  relays: {
    payerCooldownSeconds: number
    gasBudget: { windowSeconds: number; perCredential: string; perPayer: string }
  }
  /** Jobs one process runs at once; the database pool is sized from it (see server.ts). */
  jobSlots: number
  /** The job runner's lease per claim, ms (`jobs.leaseMs`); the runner's default when undefined. */
  jobLeaseMs?: number | undefined
  /** How often a worker reconciles the ledger, ms (`jobs.reconcileIntervalMs`); 60 s when undefined. */
  reconcileIntervalMs?: number | undefined
  /** How long a settlement batch collects payments before its transfer, ms (config `settlement.intervalMs`). */
  settlementIntervalMs: number
  /**
   * Push payments: what an overpayment's excess does, what arrived for a payment that closed underpaid
   * does, and how often references are scanned (ms).
   */
  push: { overpaid: 'settle' | 'refund'; underpaid: 'hold' | 'refund'; pollMs: number }
  /** Payment expiry when the merchant gives none. */
  paymentTtlSeconds: number
  /** Manual capture's hold: `captureBy` by default and at most, seconds after creation (config `capture`). */
  capture: { defaultHoldSeconds: number; maxHoldSeconds: number }
  bodyLimitBytes: number
  /**
   * How long an API key, app id or merchant lookup is reused in-process (0: never). Revocations and
   * merchant changes made through this process apply at once; other instances see them within this time.
   */
  authCacheMs: number
  /**
   * The longest a status read is held for `Prefer: wait=<seconds>` (payments/statusChanges.ts): it answers
   * as soon as the payment's status changes, else after min(wait, this). 0 offers no waiting. Default 20000.
   */
  statusWaitMaxMs: number
  /**
   * The in-process shortcuts past the plain path (fastPath.ts): cached credentials, kept final status
   * answers. false turns every one off; answers are the same either way.
   */
  fastPaths: boolean
  /**
   * How long after creation a test-mode refund's simulated transfer succeeds: the window in which the
   * merchant can simulate its failure (`POST /v1/test/refunds/{id}/simulate`). Default 1000 ms.
   */
  sandboxRefundDelayMs: number
  /**
   * Browser origins allowed per surface (see cors.ts). The gateway is open by default: its credentials
   * are headers a page must already hold, never cookies. The merchant API answers no origin by default.
   */
  cors: { gateway: '*' | string[]; merchant: string[] }
  /**
   * Merchant webhooks. Live endpoints must be `https` on a public address (checked at registration and
   * at every delivery) unless the operator sets `allowPrivateUrls`; test endpoints may also be plain
   * `http` and loopback, so a merchant can develop against a local receiver.
   */
  webhooks: { allowPrivateUrls: boolean; timeoutMs: number }
}

export const defaultConfig: ServerConfig = {
  publicBaseUrl: 'http://127.0.0.1:8787',
  chains: {},
  sanctioned: [],
  collectDataAtMinor: '100000',
  rateLimit: { perSecond: 100, burst: 200, failedAuthPerMinute: 60 },
  trustProxy: false,
  secretsKey: null,
  previousSecretsKeys: [],
  idempotencyTtlSeconds: 24 * 60 * 60,
  relays: {
    payerCooldownSeconds: 900,
    gasBudget: { windowSeconds: 3600, perCredential: '0.1', perPayer: '0.01' },
  },
  jobSlots: 64,
  settlementIntervalMs: 5000,
  push: { overpaid: 'settle', underpaid: 'hold', pollMs: 1000 },
  paymentTtlSeconds: 15 * 60,
  capture: { defaultHoldSeconds: 7 * 24 * 60 * 60, maxHoldSeconds: 30 * 24 * 60 * 60 },
  bodyLimitBytes: 1024 * 1024,
  authCacheMs: 1000,
  statusWaitMaxMs: 20_000,
  fastPaths: true,
  sandboxRefundDelayMs: 1000,
  cors: { gateway: '*', merchant: [] },
  webhooks: { allowPrivateUrls: false, timeoutMs: 10_000 },
}

/** Validates a config object (as parsed from JSON) and fills in defaults; `env:NAME` values are resolved. */
export function resolveConfig(input: unknown = {}, env: NodeJS.ProcessEnv = process.env): ServerConfig {
  const resolved = resolveEnv(input, env, '')
  const result = z.safeParse(ConfigFileSchema, resolved)
  if (!result.success) {
    const lines = result.error.issues.flatMap(describeIssue)
    throw new Error(`Invalid configuration:\n${lines.join('\n')}`)
  }
  const file = result.data
  const rateLimit =
    file.rateLimit === false
      ? false
      : file.rateLimit
        ? {
            perSecond: file.rateLimit.perSecond,
            burst: file.rateLimit.burst ?? file.rateLimit.perSecond * 2,
            failedAuthPerMinute:
              file.rateLimit.failedAuthPerMinute ??
              (defaultConfig.rateLimit as { failedAuthPerMinute: number }).failedAuthPerMinute,
          }
        : defaultConfig.rateLimit
  return {
    publicBaseUrl: (file.publicBaseUrl ?? defaultConfig.publicBaseUrl).replace(/\/+$/, ''),
    chains: file.chains ?? {},
    sanctioned: file.sanctioned ?? [],
    collectDataAtMinor:
      file.collectDataAtMinor === undefined ? defaultConfig.collectDataAtMinor : file.collectDataAtMinor,
    rateLimit,
    trustProxy: file.trustProxy ?? defaultConfig.trustProxy,
    secretsKey: file.secretsKey === undefined ? null : checkedKey(file.secretsKey, 'secretsKey'),
    previousSecretsKeys: (file.previousSecretsKeys ?? []).map((key, i) =>
      checkedKey(key, `previousSecretsKeys.${i}`),
    ),
    idempotencyTtlSeconds: file.idempotencyTtlSeconds ?? defaultConfig.idempotencyTtlSeconds,
    relays: {
      payerCooldownSeconds: file.relays?.payerCooldownSeconds ?? defaultConfig.relays.payerCooldownSeconds,
      gasBudget: {
        windowSeconds: file.relays?.gasBudget?.windowSeconds ?? defaultConfig.relays.gasBudget.windowSeconds,
        perCredential: file.relays?.gasBudget?.perCredential ?? defaultConfig.relays.gasBudget.perCredential,
        perPayer: file.relays?.gasBudget?.perPayer ?? defaultConfig.relays.gasBudget.perPayer,
      },
    },
    jobSlots: file.jobs?.slots ?? defaultConfig.jobSlots,
    ...(file.jobs?.leaseMs !== undefined ? { jobLeaseMs: file.jobs.leaseMs } : {}),
    ...(file.jobs?.reconcileIntervalMs !== undefined
      ? { reconcileIntervalMs: file.jobs.reconcileIntervalMs }
      : {}),
    settlementIntervalMs: file.settlement?.intervalMs ?? defaultConfig.settlementIntervalMs,
    push: {
      overpaid: file.push?.overpaid ?? defaultConfig.push.overpaid,
      underpaid: file.push?.underpaid ?? defaultConfig.push.underpaid,
      pollMs: file.push?.pollMs ?? defaultConfig.push.pollMs,
    },
    paymentTtlSeconds: file.paymentTtlSeconds ?? defaultConfig.paymentTtlSeconds,
    capture: captureHold(file.capture),
    bodyLimitBytes: file.bodyLimitBytes ?? defaultConfig.bodyLimitBytes,
    authCacheMs: file.authCacheMs ?? defaultConfig.authCacheMs,
    statusWaitMaxMs: file.statusWaitMaxMs ?? defaultConfig.statusWaitMaxMs,
    fastPaths: file.fastPaths ?? defaultConfig.fastPaths,
    sandboxRefundDelayMs: file.sandboxRefundDelayMs ?? defaultConfig.sandboxRefundDelayMs,
    cors: {
      gateway: normalizeOrigins(file.cors?.gateway ?? defaultConfig.cors.gateway),
      merchant: normalizeOrigins(file.cors?.merchant ?? defaultConfig.cors.merchant),
    },
    webhooks: {
      allowPrivateUrls: file.webhooks?.allowPrivateUrls ?? defaultConfig.webhooks.allowPrivateUrls,
      timeoutMs: file.webhooks?.timeoutMs ?? defaultConfig.webhooks.timeoutMs,
    },
  }
}

type ConfigIssue = z.core.$ZodIssue

/**
 * One line per problem, each naming the key where it is (`chains.eip155:1.foo`): zod/mini carries no
 * messages of its own ("Invalid input"), so the line is built from the issue's kind.
 */
function describeIssue(issue: ConfigIssue): string[] {
  const at = issue.path.map(String).join('.')
  const line = (path: string, text: string) => `  ${path || '(root)'}: ${text}`
  switch (issue.code) {
    case 'unrecognized_keys':
      return issue.keys.map((key) => line(at ? `${at}.${key}` : key, 'unknown key'))
    case 'invalid_type':
      return [
        line(at, issue.input === undefined ? `required (${issue.expected})` : `expected ${issue.expected}`),
      ]
    case 'invalid_value':
      return [line(at, `expected one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`)]
    case 'too_small':
      return [
        line(
          at,
          `must be at least ${String(issue.minimum)}${issue.origin === 'number' ? '' : ` (${issue.origin})`}`,
        ),
      ]
    case 'too_big':
      return [
        line(
          at,
          `must be at most ${String(issue.maximum)}${issue.origin === 'number' ? '' : ` (${issue.origin})`}`,
        ),
      ]
    default:
      return [line(at, issue.message === 'Invalid input' ? `invalid (${issue.code})` : issue.message)]
  }
}

/** Browsers send origins in lower case without a default port; config entries are compared in that form. */
function normalizeOrigins<T extends '*' | string[]>(origins: T): T {
  if (origins === '*') return origins
  return (origins as string[]).map((origin) =>
    origin.toLowerCase().replace(/^(https:\/\/[^/]+):443$|^(http:\/\/[^/]+):80$/, '$1$2'),
  ) as T
}

/** Reads a JSON config file (`--config`); without a path, the defaults (test mode only). */
export async function loadConfig(file?: string, env: NodeJS.ProcessEnv = process.env): Promise<ServerConfig> {
  return resolveConfig(file ? await readConfigFile(file) : {}, env)
}

/** The file as written (unvalidated JSON), e.g. to know which keys it sets. */
export async function readConfigFile(file: string): Promise<Record<string, unknown>> {
  let parsed: unknown
  try {
    parsed = JSON.parse(await fs.readFile(file, 'utf8'))
  } catch (error) {
    throw new Error(`Cannot read config file ${file}: ${(error as Error).message}`)
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new Error(`Config file ${file} must hold a JSON object.`)
  }
  return parsed as Record<string, unknown>
}

/** Any string `env:NAME` is replaced by that environment variable, so secrets stay out of files. */
/** The key as configured, once it is known to be 32 bytes (secrets.ts). */
function checkedKey(key: string, path: string): string {
  parseKey(key, path)
  return key
}

function resolveEnv(value: unknown, env: NodeJS.ProcessEnv, path: string): unknown {
  if (typeof value === 'string') {
    const match = /^env:([A-Za-z_][A-Za-z0-9_]*)$/.exec(value)
    if (!match) return value
    const resolved = env[match[1]!]
    if (resolved === undefined || resolved === '') {
      throw new Error(`Invalid configuration:\n  ${path}: environment variable ${match[1]} is not set`)
    }
    return resolved
  }
  if (Array.isArray(value)) return value.map((v, i) => resolveEnv(v, env, `${path}.${i}`))
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, resolveEnv(v, env, path ? `${path}.${k}` : k)]),
    )
  }
  return value
}

/** The manual-capture hold; a default beyond the maximum would make every default captureBy refused. */
function captureHold(file: { defaultHoldSeconds?: number; maxHoldSeconds?: number } | undefined): {
  defaultHoldSeconds: number
  maxHoldSeconds: number
} {
  const maxHoldSeconds = file?.maxHoldSeconds ?? defaultConfig.capture.maxHoldSeconds
  const defaultHoldSeconds =
    file?.defaultHoldSeconds ?? Math.min(defaultConfig.capture.defaultHoldSeconds, maxHoldSeconds)
  if (defaultHoldSeconds > maxHoldSeconds) {
    throw new Error(
      'Invalid configuration:\n  capture.defaultHoldSeconds: must be at most capture.maxHoldSeconds',
    )
  }
  return { defaultHoldSeconds, maxHoldSeconds }
}
