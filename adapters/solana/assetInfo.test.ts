import { createKeyPairSignerFromBytes, createSolanaRpc } from '@solana/kit'
import {
  createInitializeMetadataPointerInstruction,
  createInitializeMintInstruction,
  ExtensionType,
  getMintLen,
  TOKEN_2022_PROGRAM_ID,
  tokenMetadataInitializeWithRentTransfer,
} from '@solana/spl-token'
import { Keypair, SystemProgram, sendAndConfirmTransaction, Transaction } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  airdrop,
  createTestMint,
  type SolanaValidator,
  startSolanaValidator,
} from '../../test/solana/index.js'
import { solanaSigner as solanaKitEntrySigner } from '../solana-kit/index.js'
import { solanaSigner } from './index.js'

// Issue 43: the review names a Solana asset the wallet does not list from the signer's own node (the
// mint account), never from the gateway.

let validator: SolanaValidator
let payer: Keypair
beforeAll(async () => {
  validator = await startSolanaValidator({ backend: 'litesvm' })
  payer = Keypair.generate()
  await airdrop(validator.connection, payer.publicKey)
})
afterAll(() => validator?.stop())

/** A Token-2022 mint carrying its own metadata (the metadata pointer names the mint itself). */
async function token2022WithMetadata(symbol: string, decimals: number) {
  const mint = Keypair.generate()
  const space = getMintLen([ExtensionType.MetadataPointer])
  const lamports = await validator.connection.getMinimumBalanceForRentExemption(space)
  const create = new Transaction().add(
    SystemProgram.createAccount({
      fromPubkey: payer.publicKey,
      newAccountPubkey: mint.publicKey,
      space,
      lamports,
      programId: TOKEN_2022_PROGRAM_ID,
    }),
    createInitializeMetadataPointerInstruction(
      mint.publicKey,
      payer.publicKey,
      mint.publicKey,
      TOKEN_2022_PROGRAM_ID,
    ),
    createInitializeMintInstruction(mint.publicKey, decimals, payer.publicKey, null, TOKEN_2022_PROGRAM_ID),
  )
  await sendAndConfirmTransaction(validator.connection, create, [payer, mint], { commitment: 'confirmed' })
  await tokenMetadataInitializeWithRentTransfer(
    validator.connection,
    payer,
    mint.publicKey,
    payer.publicKey,
    payer,
    'Example Dollar',
    symbol,
    'https://example.com/xusd.json',
    [],
    { commitment: 'confirmed' },
    TOKEN_2022_PROGRAM_ID,
  )
  return mint.publicKey
}

describe('solanaSigner.describeAsset', () => {
  it('reads decimals from the mint account, and a Token-2022 mint’s own metadata symbol, through a Connection or a kit Rpc', async () => {
    const classic = await createTestMint(validator.connection, payer, 6)
    const withMetadata = await token2022WithMetadata('XUSD', 2)
    const chain = validator.caip2
    const kitSigner = await createKeyPairSignerFromBytes(Keypair.generate().secretKey)
    const signers = {
      connection: solanaSigner({
        keypair: Keypair.generate(),
        chains: [chain],
        connection: validator.connection,
      }),
      rpc: solanaKitEntrySigner({ kitSigner, chains: [chain], rpc: createSolanaRpc(validator.rpcUrl) }),
    }
    for (const [node, signer] of Object.entries(signers)) {
      const describe = (asset: string) => signer.describeAsset!(asset)
      expect(await describe(`${chain}/token:${classic.toBase58()}`), node).toEqual({ decimals: 6 })
      expect(await describe(`${chain}/token:${withMetadata.toBase58()}`), node).toEqual({
        symbol: 'XUSD',
        decimals: 2,
      })
      expect(await describe(`${chain}/slip44:501`), node).toEqual({ decimals: 9 })
      // Not a mint (a wallet's address, an account that does not exist), another chain: nothing to say.
      expect(await describe(`${chain}/token:${payer.publicKey.toBase58()}`), node).toBeUndefined()
      expect(
        await describe(`${chain}/token:${Keypair.generate().publicKey.toBase58()}`),
        node,
      ).toBeUndefined()
      expect(
        await describe(`solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp/token:${classic.toBase58()}`),
        node,
      ).toBeUndefined()
    }
  })

  it('without a node it knows SOL’s decimals only', async () => {
    const signer = solanaSigner({ keypair: Keypair.generate(), chains: [validator.caip2] })
    expect(await signer.describeAsset!(`${validator.caip2}/slip44:501`)).toEqual({ decimals: 9 })
    const mint = await createTestMint(validator.connection, payer, 6)
    expect(await signer.describeAsset!(`${validator.caip2}/token:${mint.toBase58()}`)).toBeUndefined()
  })
})
