import type { Keypair } from '@solana/web3.js'
import { VersionedTransaction } from '@solana/web3.js'
import type { SolanaPolicyOptions } from './inspectSolanaTransaction.js'
import {
  createSolanaSigner,
  type SignSlot,
  type SolanaExpiryOptions,
  type SolanaSigner,
  type SolanaSignerWithoutWeb3Options,
  solanaSigner as solanaSignerWithoutWeb3,
  validateChains,
} from './signer.js'

export interface SolanaKeypairSignerOptions extends SolanaPolicyOptions, SolanaExpiryOptions {
  keypair: Keypair
  /** CAIP-2 chain ids the key may sign for, e.g. `['solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp']`. */
  chains: readonly string[]
}

export type SolanaSignerOptions = SolanaKeypairSignerOptions | SolanaSignerWithoutWeb3Options

/**
 * A caipay signer for the `solana` namespace over a web3.js `Keypair`, a wallet-standard account or a
 * @solana/kit signer. Without a Keypair, caipay/adapters/solana-kit has the same function and needs no
 * web3.js.
 */
export function solanaSigner(options: SolanaSignerOptions): SolanaSigner {
  if (!('keypair' in options)) return solanaSignerWithoutWeb3(options)
  const { keypair } = options
  const address = keypair.publicKey.toBase58()
  const signSlot: SignSlot = async (decoded) => {
    // The decoder has checked that the message is canonically encoded, so web3.js signs exactly
    // `decoded.messageBytes`.
    const tx = VersionedTransaction.deserialize(decoded.bytes)
    tx.sign([keypair])
    return tx.signatures[decoded.signers.indexOf(address)]!
  }
  return createSolanaSigner({ address, chains: validateChains(options.chains), signSlot }, options)
}
