import { createKeyPairSignerFromBytes, createSolanaRpc } from '@solana/kit'
import { Keypair, type PublicKey } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import * as kitEntry from '../../adapters/solana-kit/index.js'
import { createMandates, memoryMandateStore } from '../../src/subscriptions/index.js'
import { type SolanaValidator, startSolanaValidator } from '../solana/index.js'
import { delegationOf, grantSplMandate, recordSplGrant } from './splMandate.js'

// Issue 41 through caipay/adapters/solana-kit alone on the wallet's side: a kit key pair signer over a kit
// `Rpc` lists the SPL mandate it granted and revokes it on chain, and the entry's revokeSplMandate revokes
// without @solana/web3.js (web3.js only sets the chain up here). LiteSVM judges the account.

let validator: SolanaValidator
beforeAll(async () => {
  validator = await startSolanaValidator({ backend: 'litesvm' })
})
afterAll(() => validator?.stop())

/** A kit signer of `buyer` over a kit `Rpc`, allowed to delegate to `charger`. */
async function kitSigner(buyer: Keypair, charger: PublicKey) {
  return kitEntry.solanaSigner({
    kitSigner: await createKeyPairSignerFromBytes(buyer.secretKey),
    chains: [validator.caip2],
    rpc: createSolanaRpc(validator.rpcUrl),
    allowFeePayer: true,
    delegates: [`${validator.caip2}:${charger.toBase58()}`],
  })
}

describe('caipay/adapters/solana-kit: SPL mandates without web3.js', () => {
  it('a kit signer over a kit Rpc lists its mandate live, revokes it on chain, then lists it ended', async () => {
    const buyer = Keypair.generate()
    const charger = Keypair.generate().publicKey
    const signer = await kitSigner(buyer, charger)
    const granted = await grantSplMandate(validator, signer, buyer, charger)
    expect(await delegationOf(validator, granted.source)).toEqual([charger.toBase58(), 12_000_000n])

    const mandates = createMandates({ signers: [signer], store: memoryMandateStore() })
    await recordSplGrant(mandates, 'pay_kit', buyer, granted)
    expect((await mandates.listMandates()).map((m) => [m.status, m.counted])).toEqual([['live', 12_000_000n]])

    const revokedBy = await mandates.revokeMandate('pay_kit:0')
    expect(await delegationOf(validator, granted.source)).toEqual([null, 0n])
    expect((await mandates.listMandates())[0]).toMatchObject({ status: 'ended', counted: 0n, revokedBy })
  })

  it("the entry's revokeSplMandate revokes through a Connection-shaped node and the kit signer's own key", async () => {
    const buyer = Keypair.generate()
    const charger = Keypair.generate().publicKey
    const kit = await createKeyPairSignerFromBytes(buyer.secretKey)
    const { mandate, source } = await grantSplMandate(
      validator,
      await kitSigner(buyer, charger),
      buyer,
      charger,
    )
    const signature = await kitEntry.revokeSplMandate(validator.connection, mandate, async (decoded) => {
      const [signatures] = await kit.signTransactions([
        { messageBytes: decoded.messageBytes, signatures: { [kit.address]: null } } as never,
      ])
      return signatures![kit.address]!
    })
    expect(signature).toMatch(/^[1-9A-HJ-NP-Za-km-z]{64,88}$/)
    expect(await delegationOf(validator, source)).toEqual([null, 0n])
  })
})
