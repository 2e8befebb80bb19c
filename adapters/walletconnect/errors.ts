import { isPayError, PayError } from '../../src/errors/PayError.js'

/**
 * Codes a remote wallet answers when its user declines: EIP-1193 4001, and WalletConnect's
 * USER_REJECTED family (5000 request, 5001 chains, 5002 methods, 5003 events).
 */
const userRejectedCodes: ReadonlySet<number> = new Set([4001, 5000, 5001, 5002, 5003])

/** EIP-1193 4200 and WalletConnect UNSUPPORTED_METHODS (5101). */
const unsupportedMethodCodes: ReadonlySet<number> = new Set([4200, 5101])

/**
 * Turns what `SignClient.request` rejected with into a PayError. A wallet's answer arrives as a
 * plain JSON-RPC error object `{code, message}`, not an Error; its code is kept in
 * `context.rpcCode` and the original stays the `cause`.
 */
export function toPayError(error: unknown, context: Record<string, unknown>): PayError {
  if (isPayError(error)) return error
  const rpcCode = codeOf(error)
  const rpcMessage = messageOf(error)
  if (rpcCode !== undefined && userRejectedCodes.has(rpcCode)) {
    return new PayError({
      code: 'user_rejected',
      message: 'The user rejected the request in the WalletConnect wallet.',
      context: { ...context, rpcCode },
      details: rpcMessage,
      cause: error,
    })
  }
  if (rpcCode !== undefined && unsupportedMethodCodes.has(rpcCode)) {
    return new PayError({
      code: 'unsupported_method',
      message: 'The WalletConnect wallet does not support this method.',
      context: { ...context, rpcCode },
      details: rpcMessage,
      cause: error,
    })
  }
  return new PayError({
    code: 'action_rejected',
    message: 'The WalletConnect wallet or relay refused the request.',
    context: { ...context, rpcCode },
    details: rpcMessage,
    cause: error,
  })
}

function codeOf(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined
  const code = (error as { code?: unknown }).code
  return typeof code === 'number' && Number.isInteger(code) ? code : undefined
}

function messageOf(error: unknown): string | undefined {
  if (typeof error === 'string') return error
  if (typeof error !== 'object' || error === null) return undefined
  const message = (error as { message?: unknown }).message
  return typeof message === 'string' ? message : undefined
}

export function abortedError(signal: AbortSignal, context: Record<string, unknown>): PayError {
  return new PayError({ code: 'aborted', message: 'The action was aborted.', context, cause: signal.reason })
}

/**
 * A wallet that did not answer in time may still answer later. For `eth_sendTransaction` that
 * means the transaction may be on its way, so the caller must look on chain before paying again.
 */
export function timeoutError(method: string, timeoutMs: number, context: Record<string, unknown>): PayError {
  return method === 'eth_sendTransaction'
    ? new PayError({
        code: 'action_in_doubt',
        message: 'The WalletConnect wallet did not answer in time; the transaction may still be sent.',
        context: { ...context, timeoutMs },
      })
    : new PayError({
        code: 'signer_failed',
        message: 'The WalletConnect wallet did not answer in time.',
        context: { ...context, timeoutMs },
      })
}
