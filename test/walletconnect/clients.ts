import { randomUUID } from 'node:crypto'
import { SignClient } from '@walletconnect/sign-client'

export type TestSignClient = InstanceType<typeof SignClient>
// Named through sign-client itself: @walletconnect/types is only a transitive dependency.
type SignClientOptions = NonNullable<Parameters<typeof SignClient.init>[0]>
export type Session = Awaited<ReturnType<Awaited<ReturnType<TestSignClient['connect']>>['approval']>>
type ApprovedNamespaces = Parameters<TestSignClient['approve']>[0]['namespaces']

/**
 * sign-client's own test switch (`isTestRun()` reads `IS_VITEST`). Without it the wallet client
 * fetches verify.walletconnect.org/attestation/<hash> for every proposal and request it receives
 * (guardNetwork records them; they fail fast, so nothing blocks, but they leave the machine), and
 * the event client posts INIT to pulse.walletconnect.org. Telemetry is also off per client.
 */
process.env.IS_VITEST = 'true'

export interface NetworkGuard {
  /** URLs of refused non-loopback fetches, in order. */
  readonly external: readonly string[]
  restore(): void
}

export function guardNetwork(): NetworkGuard {
  const original = globalThis.fetch
  const external: string[] = []
  globalThis.fetch = (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input))
    if (!['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)) {
      external.push(url.href)
      return Promise.reject(new TypeError(`blocked non-loopback fetch to ${url.host}`))
    }
    return original(input, init)
  }
  return {
    external,
    restore() {
      globalThis.fetch = original
    },
  }
}

/**
 * sign-client's storage interface, kept in memory: no files, nothing shared between clients.
 * Values are copied in and out as JSON, like the default file storage does.
 */
export class MemoryStorage {
  private readonly items = new Map<string, string>()
  async getKeys(): Promise<string[]> {
    return [...this.items.keys()]
  }
  async getEntries<T = unknown>(): Promise<[string, T][]> {
    return [...this.items].map(([key, value]) => [key, JSON.parse(value) as T])
  }
  async getItem<T = unknown>(key: string): Promise<T | undefined> {
    const value = this.items.get(key)
    return value === undefined ? undefined : (JSON.parse(value) as T)
  }
  async setItem<T = unknown>(key: string, value: T): Promise<void> {
    this.items.set(key, JSON.stringify(value))
  }
  async removeItem(key: string): Promise<void> {
    this.items.delete(key)
  }
}

/**
 * A sign-client on the local relay. The storage prefix is unique per client: core keeps one
 * global Core per prefix, so two clients with the same prefix would share keys and relayer.
 */
export async function createTestClient(relayUrl: string, role: 'dapp' | 'wallet'): Promise<TestSignClient> {
  const options: SignClientOptions = {
    projectId: 'caipaytestproject00000000000000',
    relayUrl,
    customStoragePrefix: `caipay-${role}-${randomUUID()}`,
    storage: new MemoryStorage(),
    telemetryEnabled: false,
    // The wallet's request queue waits a second between requests; the responder needs no queue.
    ...(role === 'wallet' ? { signConfig: { disableRequestQueue: true } } : {}),
    logger: process.env.WC_LOG_LEVEL ?? 'silent',
    metadata: {
      name: `caipay test ${role}`,
      description: `caipay WalletConnect test ${role}`,
      url: 'http://127.0.0.1',
      icons: [],
    },
  }
  return SignClient.init(options)
}

/** Closes the client's socket for good (no reconnect) and stops its heartbeat timer. */
export async function closeTestClient(client: TestSignClient): Promise<void> {
  await client.core.relayer.transportClose()
  client.core.heartbeat.stop()
}

/**
 * Pairs the two clients and settles a session: the dapp proposes `optionalNamespaces`, the wallet
 * approves `namespaces`. Resolves with the dapp's copy of the session.
 */
export async function connectSession(
  dapp: TestSignClient,
  wallet: TestSignClient,
  optionalNamespaces: Record<string, { chains: string[]; methods: string[]; events: string[] }>,
  namespaces: ApprovedNamespaces,
): Promise<Session> {
  const proposal = new Promise<{ id: number }>((resolve) => wallet.once('session_proposal', resolve))
  const { uri, approval } = await dapp.connect({ optionalNamespaces })
  if (!uri) throw new Error('sign-client returned no pairing URI')
  await wallet.pair({ uri })
  const { id } = await proposal
  const approved = await wallet.approve({ id, namespaces })
  const [session] = await Promise.all([approval(), approved.acknowledged()])
  return session
}

/** How the wallet answers one request: a result or a JSON-RPC error. */
export type WalletAnswer = { result: unknown } | { error: { code: number; message: string } }

export type WalletHandler = (request: {
  chainId: string
  method: string
  params: unknown
}) => Promise<WalletAnswer>

/**
 * Answers the wallet client's `session_request`s with `handler`. `answerNext` overrides the
 * answer to the next request only (a rejection, a slow or odd wallet), then `handler` is back.
 */
export function respondAsWallet(wallet: TestSignClient, handler: WalletHandler) {
  const overrides: WalletHandler[] = []
  const seen: { chainId: string; method: string; params: unknown }[] = []
  wallet.on('session_request', async (event) => {
    const { topic, id, params } = event
    const request = { chainId: params.chainId, method: params.request.method, params: params.request.params }
    seen.push(request)
    let answer: WalletAnswer
    try {
      answer = await (overrides.shift() ?? handler)(request)
    } catch (error) {
      answer = { error: { code: -32603, message: (error as Error).message } }
    }
    await wallet.respond({
      topic,
      response:
        'result' in answer
          ? { id, jsonrpc: '2.0', result: answer.result }
          : { id, jsonrpc: '2.0', ...answer },
    })
  })
  return {
    /** Requests the wallet received, in order. */
    seen,
    answerNext(override: WalletHandler) {
      overrides.push(override)
    },
  }
}
