import { isPayError, PayError } from './PayError.js'

// Shared by the HTTP client, the payment flow and the Solana signer: one notion of "stopped by an
// AbortSignal".

const flowAborted = 'The payment flow was aborted.'

/** The PayError an aborted signal stands for: its reason when that is one, else `aborted`. */
export function abortError(signal: AbortSignal | undefined, message = flowAborted): PayError {
  if (isPayError(signal?.reason)) return signal.reason
  return new PayError({ code: 'aborted', message, cause: signal?.reason })
}

export function throwIfAborted(signal: AbortSignal | undefined, message = flowAborted): void {
  if (signal?.aborted) throw abortError(signal, message)
}

/**
 * Settles with `promise`, or rejects as soon as `signal` aborts: local work stops at once even when
 * the callee (a signer, a host callback) ignores the signal. `error` lets a signer say what stopped in
 * its own words.
 */
export function abortable<T>(
  promise: Promise<T> | T,
  signal: AbortSignal,
  error: () => PayError = () => abortError(signal),
): Promise<T> {
  if (signal.aborted) {
    // The abandoned work may still reject later; nobody awaits it any more, so keep that quiet.
    Promise.resolve(promise).catch(() => undefined)
    return Promise.reject(error())
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(error())
    signal.addEventListener('abort', onAbort, { once: true })
    Promise.resolve(promise).then(
      (value) => {
        signal.removeEventListener('abort', onAbort)
        resolve(value)
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort)
        reject(error)
      },
    )
  })
}

/** A timer that an abort cuts short: polling's default wait and the HTTP client's back-off. */
export function sleep(ms: number, signal?: AbortSignal, message = flowAborted): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortError(signal, message))
    const onAbort = () => {
      clearTimeout(timer)
      reject(abortError(signal, message))
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}
