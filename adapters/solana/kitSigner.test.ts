import { generateKeyPairSigner, type KeyPairSigner, verifySignature } from '@solana/kit'
import {
  createAssociatedTokenAccountIdempotentInstruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
} from '@solana/spl-token'
import { Keypair, PublicKey, TransactionMessage, VersionedTransaction } from '@solana/web3.js'
import { beforeAll, describe, expect, it } from 'vitest'
import { expectPayError } from '../../test/expectPayError.js'
import {
  decodeSolanaTransaction,
  type KitTransaction,
  type KitTransactionModifyingSigner,
  solanaSigner,
} from './index.js'

// Issue 43: a @solana/kit signer pays through the same signer and guard as a web3.js Keypair: it gets
// the checked message bytes only, and the complete signed transaction comes back, base64, never sent.

const chain = 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp'
const service = Keypair.generate()
const mint = Keypair.generate().publicKey
let kit: KeyPairSigner
let buyer: PublicKey

beforeAll(async () => {
  kit = await generateKeyPairSigner()
  buyer = new PublicKey(kit.address)
})

function payment(feePayer: PublicKey = service.publicKey): unknown[] {
  const collection = getAssociatedTokenAddressSync(mint, service.publicKey)
  const message = new TransactionMessage({
    payerKey: feePayer,
    recentBlockhash: Keypair.generate().publicKey.toBase58(),
    instructions: [
      createAssociatedTokenAccountIdempotentInstruction(
        service.publicKey,
        collection,
        service.publicKey,
        mint,
      ),
      createTransferCheckedInstruction(
        getAssociatedTokenAddressSync(mint, buyer),
        mint,
        collection,
        buyer,
        1_000_000n,
        6,
      ),
    ],
  }).compileToV0Message()
  return [{ transaction: Buffer.from(new VersionedTransaction(message).serialize()).toString('base64') }]
}

const request = (params: unknown[]) => ({ chainId: chain, method: 'solana_signTransaction', params })

describe('solanaSigner with a @solana/kit signer', () => {
  it('a key pair signer signs the checked message; the transaction comes back whole, its slot filled', async () => {
    const signer = solanaSigner({ kitSigner: kit, chains: [chain] })
    expect(signer.accounts()).toEqual([`${chain}:${kit.address}`])
    const params = payment()
    expect(signer.inspect(request(params)).transfers).toEqual([
      expect.objectContaining({ amount: 1_000_000n, to: `${chain}:${service.publicKey.toBase58()}` }),
    ])
    const signed = decodeSolanaTransaction(await signer.request(request(params)))
    const sent = decodeSolanaTransaction((params[0] as { transaction: string }).transaction)
    expect(signed.messageBytes).toEqual(sent.messageBytes)
    const slot = signed.signers.indexOf(kit.address)
    expect(
      await verifySignature(
        kit.keyPair.publicKey,
        signed.signatures[slot] as never,
        signed.messageBytes as never,
      ),
    ).toBe(true)
    // The service's slot is left for the service.
    expect(signed.signatures[signed.signers.indexOf(service.publicKey.toBase58())]).toBeNull()
  })

  it('the guard applies: a transaction that makes the kit account pay fees is refused before it is asked', async () => {
    let asked = 0
    const counting = {
      address: kit.address,
      signTransactions: (...args: Parameters<KeyPairSigner['signTransactions']>) => {
        asked++
        return kit.signTransactions(...args)
      },
    }
    const signer = solanaSigner({ kitSigner: counting, chains: [chain] })
    await expectPayError(signer.request(request(payment(buyer))), 'action_rejected')
    expect(asked).toBe(0)
  })

  it('a modifying signer (a wallet through kit’s bridge) that changes the message is refused; one that keeps it signs', async () => {
    const wallet = (change: boolean): KitTransactionModifyingSigner => ({
      address: kit.address,
      async modifyAndSignTransactions(transactions) {
        const [transaction] = transactions as readonly KitTransaction[]
        const messageBytes = transaction!.messageBytes.slice()
        if (change) messageBytes[messageBytes.length - 1]! ^= 1
        const [signatures] = await kit.signTransactions([{ ...transaction!, messageBytes } as never])
        return [{ messageBytes, signatures: { ...transaction!.signatures, ...signatures } }]
      },
    })
    await expectPayError(
      solanaSigner({ kitSigner: wallet(true), chains: [chain] }).request(request(payment())),
      'action_rejected',
    )
    const signed = await solanaSigner({ kitSigner: wallet(false), chains: [chain] }).request(
      request(payment()),
    )
    expect(decodeSolanaTransaction(signed).signatures.filter(Boolean)).toHaveLength(1)
  })
})
