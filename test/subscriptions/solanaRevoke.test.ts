import { Keypair } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { solanaSigner } from '../../adapters/solana/index.js'
import { createMandates, memoryMandateStore } from '../../src/subscriptions/index.js'
import { type SolanaValidator, startSolanaValidator } from '../solana/index.js'
import { delegationOf, grantSplMandate, recordSplGrant } from './splMandate.js'

// Issue 41 on LiteSVM, judged by the runtime: a subscription's ApproveChecked, checked and signed by the
// wallet's signer, sets exactly the delegate and amount; revokeMandate's SPL Revoke really clears them.

let validator: SolanaValidator
beforeAll(async () => {
  validator = await startSolanaValidator({ backend: 'litesvm' })
})
afterAll(() => validator?.stop())

describe('SPL mandate on LiteSVM', () => {
  it('grants exactly the delegate and amount, lists it live, and revokes it on chain', async () => {
    const { connection, caip2 } = validator
    const buyer = Keypair.generate()
    const charger = Keypair.generate().publicKey
    const signer = solanaSigner({
      keypair: buyer,
      chains: [caip2],
      connection,
      allowFeePayer: true,
      delegates: [`${caip2}:${charger.toBase58()}`],
    })
    const granted = await grantSplMandate(validator, signer, buyer, charger)
    expect(granted.mandate).toMatchObject({
      kind: 'splDelegate',
      amount: 12_000_000n,
      spender: granted.terms.spender,
    })
    expect(await delegationOf(validator, granted.source)).toEqual([charger.toBase58(), 12_000_000n])

    const mandates = createMandates({ signers: [signer], store: memoryMandateStore() })
    await recordSplGrant(mandates, 'pay_live', buyer, granted)
    expect((await mandates.listMandates()).map((m) => [m.id, m.status, m.counted])).toEqual([
      ['pay_live:0', 'live', 12_000_000n],
    ])

    const revokedBy = await mandates.revokeMandate('pay_live:0')
    expect(await delegationOf(validator, granted.source)).toEqual([null, 0n])
    const [listed] = await mandates.listMandates()
    expect(listed).toMatchObject({ status: 'ended', counted: 0n, revokedBy })
  })
})
