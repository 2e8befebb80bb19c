import { Keypair } from '@solana/web3.js'
import { solanaSigner } from '../../adapters/solana/index.js'
import { payWith, type RealmPayInput } from './reactNativeWallet.js'

export async function pay(input: RealmPayInput & { chain: string }) {
  return payWith(solanaSigner({ keypair: Keypair.generate(), chains: [input.chain] }), input)
}
