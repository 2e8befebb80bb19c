import { type Address, type Hex, keccak256 } from 'viem'
import type { CooldownSubject } from '../../payments/relayGuards.js'
import type { EvmChain } from './chain.js'

/**
 * What a payer is cooled down by (payments/relayGuards.ts): its address, and for a contract payer (or an
 * EIP-7702 delegation) the hash of its code, so copies of one hostile account share its cool-down.
 */
export async function payerSubjects(chain: EvmChain, payer: Address): Promise<CooldownSubject[]> {
  return subjectsOf(payer, await chain.publicClient.getCode({ address: payer }))
}

/** payerSubjects from the payer's code as read already (one read serves the confirm's checks). */
export function subjectsOf(payer: Address, code: Hex | undefined): CooldownSubject[] {
  const subjects: CooldownSubject[] = [{ subject: payer.toLowerCase(), kind: 'address' }]
  if (code !== undefined && code !== '0x') subjects.push({ subject: keccak256(code), kind: 'code_hash' })
  return subjects
}
