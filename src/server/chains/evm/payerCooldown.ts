import { type Address, keccak256 } from 'viem'
import type { CooldownSubject } from '../../payments/relayGuards.js'
import type { EvmChain } from './chain.js'

/**
 * What a payer is cooled down by (payments/relayGuards.ts): its address, and for a contract payer (or an
 * EIP-7702 delegation) the hash of its code, so copies of one hostile account share its cool-down.
 */
export async function payerSubjects(chain: EvmChain, payer: Address): Promise<CooldownSubject[]> {
  const code = await chain.publicClient.getCode({ address: payer })
  const subjects: CooldownSubject[] = [{ subject: payer.toLowerCase(), kind: 'address' }]
  if (code !== undefined && code !== '0x') subjects.push({ subject: keccak256(code), kind: 'code_hash' })
  return subjects
}
