/**
 * A Solana transaction the service pays the fee for, failing on chain after its preflight: the buyer
 * empties its token account between the service's send and the block (here: the send is lost on the way,
 * the buyer drains its account, and the recorded bytes land with preflight skipped, failing and paying
 * the service's fee). The fee is paid once, nothing sends it again, the payment fails with a named code,
 * the fee is charged to the caller's budget and the buyer is cooled down.
 */
import { createTransferInstruction } from '@solana/spl-token'
import { Transaction } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  confirmedPayment,
  paymentRow,
  type SolanaLive,
  startSolanaLive,
  tokenAccount,
  until,
} from './live.js'

let live: SolanaLive

beforeAll(async () => {
  live = await startSolanaLive()
})

afterAll(async () => {
  await live?.close()
})

describe('a Solana transaction that fails on chain after preflight', () => {
  it('costs the fee once: the payment fails transaction_failed, the fee is charged to the key, the buyer is cooled down', async () => {
    const buyer = await live.newBuyer()
    const merchantId = await live.createMerchant()
    const connection = live.validator.connection
    // The service's send is lost (the node answers its signature and drops it).
    live.proxy.inject('sendTransaction', { kind: 'drop' })
    const { paymentId, signature } = await confirmedPayment(live, buyer, merchantId)
    const feePayerBefore = BigInt(await connection.getBalance(live.service.publicKey))

    // The buyer empties its token account, then the recorded bytes land without a preflight.
    const sink = tokenAccount(live, (await live.newBuyer()).publicKey)
    const source = tokenAccount(live, buyer.publicKey)
    const held = await live.balance(buyer.publicKey)
    // The attacker pays this one's fee itself.
    await connection.requestAirdrop(buyer.publicKey, 1_000_000_000)
    const drain = new Transaction().add(createTransferInstruction(source, sink, buyer.publicKey, held))
    await connection.sendTransaction(drain, [buyer])
    const recorded = await live.t.db
      .selectFrom('solana_transactions')
      .select('raw')
      .where('signature', '=', signature)
      .executeTakeFirstOrThrow()
    await connection.sendRawTransaction(Buffer.from(recorded.raw, 'base64'), { skipPreflight: true })
    const fee = feePayerBefore - BigInt(await connection.getBalance(live.service.publicKey))
    expect(fee).toBeGreaterThan(0n)
    live.proxy.clear()

    const executed = live.executed()
    const runner = live.startRunner()
    try {
      await until(async () => (await paymentRow(live, paymentId)).status === 'failed', 'the payment failed')
    } finally {
      await runner.stop()
    }
    expect((await paymentRow(live, paymentId)).failure_code).toBe('transaction_failed')
    expect(live.executed()).toBe(executed)
    expect(BigInt(await connection.getBalance(live.service.publicKey))).toBe(feePayerBefore - fee)
    const charges = await live.t.db.selectFrom('executor_gas_charges').selectAll().execute()
    expect(charges.map((c) => [c.state, BigInt(c.amount)])).toEqual([['spent', fee]])
    const cooled = await live.t.db.selectFrom('payer_cooldowns').selectAll().execute()
    expect(cooled.map((c) => c.subject)).toEqual([buyer.publicKey.toBase58()])
    console.info(`Solana: one failed transaction cost the fee payer ${fee} lamports, once`)
  }, 60_000)
})
