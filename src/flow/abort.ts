import { isPayError, PayError } from '../errors/PayError.js'

/** The PayError an aborted signal stands for: its reason when that is one, else `aborted`. */
export function abortError(signal: AbortSignal): PayError {
  if (isPayError(signal.reason)) return signal.reason
  return new PayError({ code: 'aborted', message: 'The payment flow was aborted.', cause: signal.reason })
}

export function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw abortError(signal)
}

/**
 * Settles with `promise`, or rejects as soon as `signal` aborts: local work stops at once even when
 * the callee (a signer, a host callback) ignores the signal.
 */
export function abortable<T>(promise: Promise<T> | T, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(abortError(signal))
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortError(signal))
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

/** A timer that an abort cuts short; the default `sleep` of polling. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortError(signal))
    const onAbort = () => {
      clearTimeout(timer)
      reject(abortError(signal!))
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}
