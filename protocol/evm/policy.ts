import { sameCaip } from '../../src/caip/caip.js'
import { rejected } from './errors.js'

/** What the EVM decoder lets through beyond direct payments. */
export interface EvmDecodePolicy {
  /**
   * CAIP-10 spenders an approval may name: ERC-20 `approve` and EIP-2612 `Permit` (e.g. Permit2 on
   * its chain). Default none: no approval is signed. The guard still bounds the approved amount by
   * the option's.
   */
  spenders?: readonly string[]
}

export function assertAllowedSpender(
  policy: EvmDecodePolicy,
  spender: string,
  context: Record<string, unknown>,
): void {
  if (!policy.spenders?.some((allowed) => sameCaip(allowed, spender))) {
    throw rejected('An approval to a spender the wallet did not allow-list is not signed.', {
      ...context,
      spender,
    })
  }
}
