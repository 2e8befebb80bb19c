import { generateKeyPairSigner } from '@solana/kit'
import { solanaSigner } from '../../adapters/solana-kit/index.js'
import { payWith, type RealmPayInput } from './reactNativeWallet.js'

/** The kit-only variant: caipay's kit entry and a @solana/kit key pair signer, no web3.js. */
export async function pay(input: RealmPayInput & { chain: string }) {
  return payWith(solanaSigner({ kitSigner: await generateKeyPairSigner(), chains: [input.chain] }), input)
}
