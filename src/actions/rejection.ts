import { isPayError } from '../errors/PayError.js'

/** EIP-1193 `userRejectedRequest`; Solana wallets (Phantom, wallet-standard bridges) use it too. */
export const userRejectedCode = 4001

/**
 * Did the user decline? A PayError `user_rejected`, or any error carrying EIP-1193 code 4001 anywhere
 * in its `cause` chain (viem wraps the provider's error). Decided by code, never by message text.
 */
export function isUserRejection(error: unknown): boolean {
  let current: unknown = error
  for (let depth = 0; depth < 8 && current !== null && typeof current === 'object'; depth++) {
    if (isPayError(current, 'user_rejected')) return true
    if ((current as { code?: unknown }).code === userRejectedCode) return true
    current = (current as { cause?: unknown }).cause
  }
  return false
}
