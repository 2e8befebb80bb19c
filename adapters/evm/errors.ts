import { userRejectedCode } from '../../src/actions/rejection.js'
import { abortable } from '../../src/errors/abort.js'
import { isPayError, PayError } from '../../src/errors/PayError.js'

/** EIP-1193 code for "the provider does not support the method". */
const unsupportedMethodCode = 4200

/**
 * Turns whatever a wallet, viem or the network threw into a PayError, keeping the EIP-1193 code
 * (the deepest numeric `code` in the cause chain) in `context.rpcCode` and the original as `cause`.
 */
export function toPayError(error: unknown, context: Record<string, unknown> = {}): PayError {
  if (isPayError(error)) return error
  const rpcCode = findRpcCode(error)
  if (rpcCode === userRejectedCode) {
    return new PayError({
      code: 'user_rejected',
      message: 'The user rejected the request in the wallet.',
      context: { ...context, rpcCode },
      cause: error,
    })
  }
  if (rpcCode === unsupportedMethodCode) {
    return new PayError({
      code: 'unsupported_method',
      message: 'The wallet does not support this method.',
      context: { ...context, rpcCode },
      cause: error,
    })
  }
  if (rpcCode === undefined && isTransportError(error)) {
    return new PayError({
      code: 'network_error',
      message: 'The EVM node could not be reached.',
      context,
      details: shortMessageOf(error),
      cause: error,
    })
  }
  return new PayError({
    code: 'action_rejected',
    message: 'The wallet or node refused the action.',
    context: { ...context, rpcCode },
    details: shortMessageOf(error),
    cause: error,
  })
}

function findRpcCode(error: unknown): number | undefined {
  let found: number | undefined
  for (let current = error, depth = 0; current && typeof current === 'object' && depth < 10; depth++) {
    const code = (current as { code?: unknown }).code
    if (typeof code === 'number' && Number.isInteger(code)) found = code
    current = (current as { cause?: unknown }).cause
  }
  return found
}

function isTransportError(error: unknown): boolean {
  const names = new Set(['HttpRequestError', 'TimeoutError', 'WebSocketRequestError', 'SocketClosedError'])
  for (let current = error, depth = 0; current instanceof Error && depth < 10; depth++) {
    if (names.has(current.name)) return true
    current = current.cause
  }
  return false
}

function shortMessageOf(error: unknown): string | undefined {
  if (!(error instanceof Error)) return typeof error === 'string' ? error : undefined
  return (error as { shortMessage?: string }).shortMessage ?? error.message
}

function abortedError(signal: AbortSignal, context: Record<string, unknown> = {}): PayError {
  return new PayError({ code: 'aborted', message: 'The action was aborted.', context, cause: signal.reason })
}

export function throwIfAborted(signal: AbortSignal | undefined, context?: Record<string, unknown>): void {
  if (signal?.aborted) throw abortedError(signal, context)
}

/**
 * Settles with `work` unless `signal` aborts first. The work itself cannot be recalled (a wallet
 * prompt or an HTTP call may still finish); the caller only stops waiting for it.
 */
export function withAbort<T>(
  work: Promise<T>,
  signal: AbortSignal | undefined,
  context?: Record<string, unknown>,
): Promise<T> {
  return signal ? abortable(work, signal, () => abortedError(signal, context)) : work
}

export { rejected } from '../../protocol/evm/errors.js'
