import { expect } from 'vitest'
import { isPayError, type PayError, type PayErrorCode } from '../src/errors/PayError.js'

/**
 * The PayError `promise` rejects with. Fails the test when it resolves, rejects with anything else, or
 * (given `code`) with another code: a signer's failures must all be PayErrors a wallet can branch on.
 */
export async function expectPayError(promise: Promise<unknown>, code?: PayErrorCode): Promise<PayError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(isPayError(error), String(error)).toBe(true)
  if (code !== undefined) expect((error as PayError).code).toBe(code)
  return error as PayError
}
