import { randomBytes } from 'node:crypto'
import { getAddress, type Hex, stringToHex, verifyMessage } from 'viem'
import type { WalletRpcAction } from '../../../contract/gateway.js'
import type { QuoteContext, WalletAccount } from '../types.js'

/** What the mixed option keeps in its state to check the EVM half at confirm. */
export interface AttestationState {
  evmAccount: string
  message: string
}

/**
 * The EVM half of a mixed-chain option (spec rule 4): a `personal_sign` statement that the buyer paying
 * on Solana also controls an EVM account. It names the payment, a random nonce that exists only in this
 * option's state (options get their ids after quoting), the amount and both accounts, so a signature
 * from one option or payment is worth nothing for another.
 */
export function attestation(
  ctx: QuoteContext,
  evm: WalletAccount,
): { action: WalletRpcAction; state: AttestationState } {
  const message = [
    `caipay payment ${ctx.payment.id}`,
    `Option nonce ${randomBytes(16).toString('hex')}`,
    `I pay ${ctx.tokenAmount} minor units of ${ctx.asset.symbol} (${ctx.asset.id})`,
    `from ${ctx.account.id}`,
    `and control ${evm.id}.`,
  ].join('\n')
  return {
    state: { evmAccount: evm.id, message },
    action: {
      type: 'walletRpc',
      walletRpc: {
        chainId: evm.chainId,
        method: 'personal_sign',
        params: JSON.stringify([stringToHex(message), getAddress(evm.address)]),
      },
    },
  }
}

export async function validAttestation(state: AttestationState, signature: string): Promise<boolean> {
  const address = getAddress(state.evmAccount.slice(state.evmAccount.lastIndexOf(':') + 1))
  try {
    return await verifyMessage({ address, message: state.message, signature: signature as Hex })
  } catch {
    return false
  }
}
