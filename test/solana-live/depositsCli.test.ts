import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { createTransfer, parseURL, type TransferRequestURL } from '@solana/pay'
import { type Keypair, LAMPORTS_PER_SOL } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SolanaChain } from '../../src/server/chains/solana/chain.js'
import { scanPushPayments } from '../../src/server/chains/solana/push.js'
import { tokenAmountFor } from '../../src/server/gateway/quote.js'
import { airdrop, confirmSignature } from '../solana/index.js'
import { type SolanaLive, startSolanaLive } from './live.js'

/**
 * `caipay deposits list|refund|assign` (docs/push-payments.md), the real CLI run as an operator runs it,
 * against the database of a live server whose deposits came from real transfers on the local cluster;
 * the refund's transfer is read back from the chain.
 */
let live: SolanaLive
let chain: SolanaChain
beforeAll(async () => {
  live = await startSolanaLive()
  chain = live.t.app.liveChains.solana[0]!
})
afterAll(() => live?.close())

const bin = fileURLToPath(new URL('../../bin/caipay.js', import.meta.url))
const due = 12_500_000n

function caipay(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args, '--database-url', live.t.databaseUrl], {
      env: { ...process.env, DATABASE_URL: '' },
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    child.on('exit', (code) => resolve({ code, stdout, stderr }))
  })
}

async function wallet(): Promise<Keypair> {
  const buyer = await live.newBuyer(100_000_000n)
  await airdrop(live.validator.connection, buyer.publicKey, LAMPORTS_PER_SOL)
  return buyer
}

async function pay(buyer: Keypair, url: string): Promise<void> {
  const { connection } = live.validator
  const request = parseURL(url) as TransferRequestURL
  const transaction = await createTransfer(connection, buyer.publicKey, {
    recipient: request.recipient,
    amount: request.amount!,
    splToken: request.splToken!,
    reference: request.reference!,
  })
  transaction.sign(buyer)
  await confirmSignature(connection, await connection.sendRawTransaction(transaction.serialize()))
}

describe('caipay deposits', () => {
  it('lists the deposits, refunds one to its sender on the chain and assigns another to the float', {
    timeout: 120_000,
  }, async () => {
    const scan = () => scanPushPayments(live.t.db, chain, live.t.app.config, tokenAmountFor)
    const merchantId = await live.createMerchant()
    const { paymentId } = await live.createPayment(merchantId)
    const options = await live.gateway(paymentId, 'options', { accounts: [] })
    const { url } = options.json.options.find((o: { source?: string }) => o.source === 'push').push
    await pay(await wallet(), url)
    await scan()
    // Paid twice, by two senders: two `duplicate` deposits.
    const [refundee, keeper] = [await wallet(), await wallet()]
    await pay(refundee, url)
    await pay(keeper, url)
    const outcomes = await scan()
    expect(outcomes.map((o) => o.kind)).toEqual(['deposit', 'deposit'])

    const listed = await caipay(['deposits', 'list', '--json'])
    expect(listed.code, listed.stderr).toBe(0)
    const rows = JSON.parse(listed.stdout) as Record<string, string>[]
    const sent = (who: Keypair) => rows.find((r) => r.sender === `${live.caip2}:${who.publicKey.toBase58()}`)!
    for (const who of [refundee, keeper])
      expect(sent(who)).toMatchObject({
        payment_id: paymentId,
        partner_id: live.t.partnerId,
        reason: 'duplicate',
        status: 'held',
        amount: due.toString(),
      })
    const table = await caipay(['deposits', 'list', '--mode', 'live'])
    expect(table.stdout.split('\n')[0]).toMatch(
      /^DEPOSIT\s+PARTNER\s+PAYMENT\s+ASSET\s+AMOUNT\s+REASON\s+STATUS/,
    )
    expect(table.stdout).toContain(sent(refundee).id)
    const none = await caipay(['deposits', 'list', '--mode', 'test', '--json'])
    expect(JSON.parse(none.stdout)).toEqual([])

    const before = await live.balance(refundee.publicKey)
    const refunded = await caipay(['deposits', 'refund', sent(refundee).id!])
    expect(refunded.code, refunded.stderr).toBe(0)
    expect(refunded.stdout).toBe(
      `Deposit ${sent(refundee).id} (${due} of ${live.asset}) is being sent back to ${sent(refundee).sender}.\n`,
    )
    const runner = live.startRunner()
    const deadline = Date.now() + 30_000
    const status = async () =>
      (
        await live.t.db
          .selectFrom('deposits')
          .select('status')
          .where('id', '=', sent(refundee).id!)
          .executeTakeFirstOrThrow()
      ).status
    while ((await status()) !== 'refunded' && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 50))
    await runner.stop()
    // Read from the chain: the whole deposit is back with its sender.
    expect(await live.balance(refundee.publicKey)).toBe(before + due)

    const assigned = await caipay(['deposits', 'assign', sent(keeper).id!, '--json'])
    expect(assigned.code, assigned.stderr).toBe(0)
    expect(JSON.parse(assigned.stdout)).toMatchObject({ id: sent(keeper).id, status: 'assigned' })
    const after = JSON.parse((await caipay(['deposits', 'list', '--json'])).stdout) as Record<
      string,
      string
    >[]
    expect(Object.fromEntries(after.map((r) => [r.id, r.status]))).toMatchObject({
      [sent(refundee).id!]: 'refunded',
      [sent(keeper).id!]: 'assigned',
    })
    const float = await live.t.db
      .selectFrom('ledger_entries')
      .select(['debit_kind', 'credit_kind', 'amount'])
      .where('tx_id', '=', sent(keeper).id!)
      .execute()
    expect(float).toContainEqual({ debit_kind: 'deposits', credit_kind: 'float', amount: due.toString() })

    // Resolved once: a second resolution, and a missing id, fail with a message and a non-zero exit.
    const twice = await caipay(['deposits', 'refund', sent(keeper).id!])
    expect(twice.code).not.toBe(0)
    expect(twice.stderr).toMatch(/assigned/)
    const missing = await caipay(['deposits', 'assign'])
    expect(missing.code).not.toBe(0)
    expect(missing.stderr).toContain('Give exactly one deposit id')
  })
})
