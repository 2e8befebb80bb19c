import type { Keypair } from '@solana/web3.js'
import { VersionedTransaction } from '@solana/web3.js'
import type { SolanaPolicyOptions } from './inspectSolanaTransaction.js'
import { revokeSplMandate, type SolanaMandateNode, solanaMandateStatus } from './mandates.js'
import {
  createSolanaSigner,
  type SignerExtension,
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
  const mandates = mandatesOver(options.connection)
  if (!('keypair' in options)) return solanaSignerWithoutWeb3(options, mandates)
  const { keypair } = options
  const address = keypair.publicKey.toBase58()
  const signSlot: SignSlot = async (decoded) => {
    // The decoder has checked that the message is canonically encoded, so web3.js signs exactly
    // `decoded.messageBytes`.
    const tx = VersionedTransaction.deserialize(decoded.bytes)
    tx.sign([keypair])
    return tx.signatures[decoded.signers.indexOf(address)]!
  }
  return createSolanaSigner({ address, chains: validateChains(options.chains), signSlot }, options, mandates)
}

/**
 * A web3.js Connection also reads token accounts and sends: the mandates the key granted can be read and
 * revoked through it (docs/subscriptions.md).
 */
function mandatesOver(connection: unknown): SignerExtension | undefined {
  if (!isMandateNode(connection)) return undefined
  return (signer, signSlot) => {
    signer.mandateStatus = solanaMandateStatus(connection, signer.address, (request) =>
      signer.inspect(request),
    )
    signer.revokeMandate = (mandate, { signal } = {}) =>
      revokeSplMandate(
        connection,
        mandate,
        (decoded) => signSlot(decoded, mandate.owner.slice(0, mandate.owner.lastIndexOf(':')), signal),
        { signal },
      )
  }
}

function isMandateNode(node: unknown): node is SolanaMandateNode {
  const candidate = (node ?? {}) as Partial<SolanaMandateNode>
  return (
    typeof candidate.getAccountInfo === 'function' &&
    typeof candidate.getLatestBlockhash === 'function' &&
    typeof candidate.sendRawTransaction === 'function'
  )
}
