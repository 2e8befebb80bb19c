import type { ActionInspection, SignatureStatus, Signer, SignerRequest } from '../../src/actions/types.js'
import { sameCaip } from '../../src/caip/caip.js'
import { PayError } from '../../src/errors/PayError.js'
import { abortedError, timeoutError, toPayError } from './errors.js'
import { type NamespaceScope, namespaceOf, namespaceScope, sessionNamespaces } from './session.js'
import type { WalletConnectClient, WalletConnectSession } from './types.js'

/** Decodes an action for the signing guard, e.g. `decodeEvmAction` or a Solana inspector. */
export type WalletConnectInspect = (request: SignerRequest) => ActionInspection | Promise<ActionInspection>

export interface WalletConnectSignerBaseOptions {
  /** A `SignClient` (dapp side) that holds the session. */
  client: WalletConnectClient
  /**
   * How long to wait for the wallet's answer. Default 5 minutes, sign-client's own request
   * expiry; the wallet is told the same deadline.
   */
  requestTimeoutMs?: number
  /**
   * Decodes an action (e.g. `decodeEvmAction`). It runs before anything is forwarded, and an action
   * it cannot decode (or a signer without one) is not forwarded: the remote wallet is the key.
   */
  inspect?: WalletConnectInspect
  /**
   * The params sent to the wallet, rebuilt from what `inspect` decoded (e.g. `evmForwardParams`),
   * so fields the guard never read do not reach the key. Default: the action's params as given
   * (Solana: only `transaction`).
   */
  forwardParams?: WalletConnectForwardParams
  /**
   * Reads what became of an earlier signature from the dapp's own node of the chain, e.g.
   * `evmSignatureStatus(publicClient)` or `solanaSignatureStatus(connection, address)`. The remote
   * wallet cannot be asked, so without it every earlier signature answers `live` (docs/exposure.md).
   */
  signatureStatus?: WalletConnectSignatureStatus
}

export type WalletConnectSignatureStatus = (
  request: SignerRequest,
  result: string,
) => Promise<SignatureStatus>

/** Builds the params forwarded for an action from its decoded fields. */
export type WalletConnectForwardParams = (request: SignerRequest) => readonly unknown[]

export type WalletConnectSignerOptions = WalletConnectSignerBaseOptions & {
  /** CAIP-2 namespace this signer serves: `eip155`, `solana`, ... */
  namespace: string
} & (
    | {
        /** The settled session (`SessionTypes.Struct`); only its topic is kept. */
        session: WalletConnectSession
      }
    | { topic: string }
  )

export interface WalletConnectSigner extends Signer {
  /** Topic of the WalletConnect session the signer forwards to. */
  readonly topic: string
  /** CAIP-2 chains the session approves for this namespace (empty once the session is gone). */
  chains(): readonly string[]
}

const defaultRequestTimeoutMs = 5 * 60_000
// sign-client refuses request expiries outside these bounds (seconds).
const minExpirySeconds = 300
const maxExpirySeconds = 7 * 24 * 60 * 60

/**
 * A caipay Signer for one namespace of a WalletConnect session: actions go to the remote wallet
 * with `client.request`. Accounts and methods are what the wallet approved, read from the client's
 * live copy of the session on each call, so `session_update` and disconnects are seen.
 * Nothing is sent for a chain or method the session did not approve.
 */
export function walletConnectSigner(options: WalletConnectSignerOptions): WalletConnectSigner {
  const { client, namespace, inspect, forwardParams, signatureStatus } = options
  const topic = 'topic' in options ? options.topic : options.session.topic
  const timeoutMs = requestTimeout(options.requestTimeoutMs)
  const expiry = Math.min(maxExpirySeconds, Math.max(minExpirySeconds, Math.ceil(timeoutMs / 1000) + 1))

  const session = liveSession(client, topic)
  if (!session) {
    throw new PayError({
      code: 'missing_signer',
      message: 'The WalletConnect client has no session with this topic.',
      context: { topic, namespace },
    })
  }
  if (!sessionNamespaces(session).includes(namespace)) {
    throw new PayError({
      code: 'missing_signer',
      message: 'The WalletConnect session approved no accounts of this namespace.',
      context: { topic, namespace, approved: sessionNamespaces(session) },
    })
  }

  const scopeOrEmpty = (): NamespaceScope | undefined => {
    const current = liveSession(client, topic)
    return current && !isExpired(current) ? namespaceScope(current, namespace) : undefined
  }

  const signer: WalletConnectSigner = {
    namespace,
    topic,
    accounts: () => scopeOrEmpty()?.accounts ?? [],
    chains: () => scopeOrEmpty()?.chains ?? [],
    get methods() {
      return scopeOrEmpty()?.methods ?? []
    },
    async request(request) {
      const { chainId, method, signal } = request
      const context = { chainId, method, topic }
      if (signal?.aborted) throw abortedError(signal, context)
      const scope = currentScope(client, topic, namespace, context)
      const approvedMethods =
        namespaceOf(chainId) === namespace ? scope.methodsByChain.get(chainId) : undefined
      if (!approvedMethods) {
        throw new PayError({
          code: 'action_rejected',
          message: 'The WalletConnect session did not approve this chain.',
          context: { ...context, approvedChains: scope.chains },
        })
      }
      if (!approvedMethods.has(method)) {
        throw new PayError({
          code: 'unsupported_method',
          message: 'The WalletConnect session did not approve this method on this chain.',
          context: { ...context, approvedMethods: [...approvedMethods] },
        })
      }
      if (!inspect) {
        throw new PayError({
          code: 'action_rejected',
          message: 'The WalletConnect signer has no decoder for this namespace, so nothing is forwarded.',
          context,
        })
      }
      const inspection = await inspect(request)
      if (!scope.accounts.some((account) => sameCaip(account, inspection.account))) {
        throw new PayError({
          code: 'action_rejected',
          message: 'The action would be signed by an account the WalletConnect session did not approve.',
          context: { ...context, account: inspection.account },
        })
      }
      const params = toWalletParams(method, forwardParams ? forwardParams(request) : request.params)
      let pending: Promise<unknown>
      try {
        pending = client.request<unknown>({ topic, chainId, request: { method, params }, expiry })
      } catch (error) {
        // A client that throws instead of rejecting (e.g. not initialised) still yields a PayError.
        throw toPayError(error, context)
      }
      const result = await settle(pending, signal, timeoutMs, context)
      return toResult(method, result, context)
    },
  }
  if (inspect) signer.inspect = inspect
  signer.signatureStatus = signatureStatus ?? (async () => 'live')
  return signer
}

export interface WalletConnectSignersOptions {
  requestTimeoutMs?: number
  /** Decoders by namespace, e.g. `{ eip155: decodeEvmAction }`; a namespace without one forwards nothing. */
  inspect?: Readonly<Record<string, WalletConnectInspect>>
  /** Param builders by namespace, e.g. `{ eip155: evmForwardParams }`. */
  forwardParams?: Readonly<Record<string, WalletConnectForwardParams>>
  /** Readers of earlier signatures by namespace (see `WalletConnectSignerBaseOptions.signatureStatus`). */
  signatureStatus?: Readonly<Record<string, WalletConnectSignatureStatus>>
}

/** One signer per namespace the session approved, in the session's order. */
export function walletConnectSigners(
  client: WalletConnectClient,
  session: WalletConnectSession | string,
  options: WalletConnectSignersOptions = {},
): WalletConnectSigner[] {
  const topic = typeof session === 'string' ? session : session.topic
  const current = liveSession(client, topic)
  if (!current) {
    throw new PayError({
      code: 'missing_signer',
      message: 'The WalletConnect client has no session with this topic.',
      context: { topic },
    })
  }
  return sessionNamespaces(current).map((namespace) => {
    const inspect = options.inspect?.[namespace]
    const forwardParams = options.forwardParams?.[namespace]
    const signatureStatus = options.signatureStatus?.[namespace]
    return walletConnectSigner({
      client,
      topic,
      namespace,
      ...(options.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: options.requestTimeoutMs }),
      ...(inspect ? { inspect } : {}),
      ...(forwardParams ? { forwardParams } : {}),
      ...(signatureStatus ? { signatureStatus } : {}),
    })
  })
}

/** Past sign-client's longest expiry the wallet has dropped the request anyway (and setTimeout overflows at 2^31 ms). */
function requestTimeout(requested: number | undefined): number {
  if (requested === undefined) return defaultRequestTimeoutMs
  if (!(requested > 0)) {
    throw new PayError({
      code: 'invalid_signer',
      message: 'requestTimeoutMs must be a positive number of milliseconds.',
      context: { requestTimeoutMs: requested },
    })
  }
  return Math.min(requested, maxExpirySeconds * 1000)
}

function liveSession(client: WalletConnectClient, topic: string): WalletConnectSession | undefined {
  try {
    // sign-client's store throws for an unknown key (deleted on disconnect or expiry).
    return client.session.get(topic)
  } catch {
    return undefined
  }
}

function isExpired(session: WalletConnectSession): boolean {
  return session.expiry * 1000 <= Date.now()
}

function currentScope(
  client: WalletConnectClient,
  topic: string,
  namespace: string,
  context: Record<string, unknown>,
): NamespaceScope {
  const session = liveSession(client, topic)
  if (!session || isExpired(session)) {
    throw new PayError({
      code: 'signer_failed',
      message: 'The WalletConnect session is no longer active (disconnected or expired).',
      context,
    })
  }
  return namespaceScope(session, namespace)
}

/**
 * caipay carries `solana_signTransaction` params as `[{ transaction }]`; WalletConnect's Solana
 * RPC takes the object itself. EVM params are arrays in both.
 */
function toWalletParams(method: string, params: readonly unknown[]): unknown {
  if (method === 'solana_signTransaction' && params.length === 1 && isObject(params[0])) {
    return { transaction: params[0].transaction }
  }
  return params
}

/**
 * Wallets answer `solana_signTransaction` with a string, `{transaction}` or only `{signature}`.
 * The service needs the complete signed transaction (it checks the message byte for byte), so a
 * detached signature is refused rather than guessed into a transaction.
 */
function toResult(method: string, result: unknown, context: Record<string, unknown>): string {
  if (typeof result === 'string' && result.length > 0) return result
  if (method === 'solana_signTransaction' && isObject(result)) {
    if (typeof result.transaction === 'string' && result.transaction.length > 0) return result.transaction
    if (typeof result.signature === 'string') {
      throw new PayError({
        code: 'action_rejected',
        message:
          'The wallet returned only a detached signature; caipay needs the complete signed transaction (base64).',
        context,
      })
    }
  }
  throw new PayError({
    code: 'action_rejected',
    message: 'The WalletConnect wallet answered with an unexpected result.',
    context: { ...context, resultType: result === null ? 'null' : typeof result },
  })
}

/**
 * Waits for the wallet's answer, the abort signal or the timeout. sign-client cannot recall a
 * request, so on abort or timeout the wallet may still answer; that late answer is dropped.
 */
function settle<T>(
  pending: Promise<T>,
  signal: AbortSignal | undefined,
  timeoutMs: number,
  context: Record<string, unknown> & { method: string },
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let timer: ReturnType<typeof setTimeout> | undefined
    const cleanup = () => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
    }
    const giveUp = (error: PayError) => {
      cleanup()
      pending.catch(() => {})
      reject(error)
    }
    const onAbort = () => giveUp(abortedError(signal!, { ...context, sent: true }))
    signal?.addEventListener('abort', onAbort, { once: true })
    timer = setTimeout(() => giveUp(timeoutError(context.method, timeoutMs, context)), timeoutMs)
    pending.then(
      (value) => {
        cleanup()
        resolve(value)
      },
      (error: unknown) => {
        cleanup()
        reject(toPayError(error, context))
      },
    )
  })
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
