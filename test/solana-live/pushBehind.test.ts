import { createTransfer, parseURL, type TransferRequestURL } from '@solana/pay'
import { type Keypair, LAMPORTS_PER_SOL } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SolanaChain } from '../../src/server/chains/solana/chain.js'
import { scanPushPayments } from '../../src/server/chains/solana/push.js'
import { tokenAmountFor } from '../../src/server/gateway/quote.js'
import type { JsonRpcResponse } from '../rpcFaults.js'
import { airdrop, confirmSignature } from '../solana/index.js'
import { nodeBehind } from '../solana/nodeBehind.js'
import { paymentRow, type SolanaLive, startSolanaLive } from './live.js'

/**
 * The Solana push scan with a node behind the transfer answering its reads (docs/live-mode.md, "Chain
 * reads"): a listing asked at the pass's slot is refused by it and asked again, never taken shorter, and a
 * listed transfer it does not have yet stops the pass rather than being passed. Either way the transfer is
 * found, where a shorter answer taken as complete would have lost it: the next pass lists from this one's
 * slot.
 */
let live: SolanaLive
let chain: SolanaChain
let merchantId: string
beforeAll(async () => {
  live = await startSolanaLive()
  chain = live.t.app.liveChains.solana[0]!
  merchantId = await live.createMerchant()
})
afterAll(() => live?.close())

const due = 12_500_000n
const scan = () => scanPushPayments(live.t.db, chain, live.t.app.config, tokenAmountFor)

/** A new payment paid with its transfer request by a new wallet: its id, the signature and its slot. */
async function pushPaid(): Promise<{ paymentId: string; signature: string; slot: number }> {
  const { paymentId } = await live.createPayment(merchantId)
  const options = await live.gateway(paymentId, 'options', { accounts: [] })
  expect(options.statusCode, options.body).toBe(200)
  const push = options.json.options.find((o: { source?: string }) => o.source === 'push')
  const request = parseURL(push.push.url) as TransferRequestURL
  const buyer: Keypair = await live.newBuyer(100_000_000n)
  const { connection } = live.validator
  await airdrop(connection, buyer.publicKey, LAMPORTS_PER_SOL)
  const transaction = await createTransfer(connection, buyer.publicKey, {
    recipient: request.recipient,
    amount: request.amount!,
    splToken: request.splToken!,
    reference: request.reference!,
  })
  transaction.sign(buyer)
  const signature = await connection.sendRawTransaction(transaction.serialize())
  await confirmSignature(connection, signature)
  const landed = await connection.getTransaction(signature, { maxSupportedTransactionVersion: 0 })
  return { paymentId, signature, slot: landed!.slot }
}

describe('the push scan with a node behind', () => {
  it("first pass: the reference's listing from a node behind the transfer is refused and asked again; the transfer is found", async () => {
    const paid = await pushPaid()
    const answers: JsonRpcResponse[] = []
    live.proxy.inject(
      'getSignaturesForAddress',
      nodeBehind(paid.slot - 1, (answer) => answers.push(answer)),
      { times: 1 },
    )
    // The process's first pass (no slot to list the collection account from): it lists each reference.
    expect(await scan()).toEqual([{ kind: 'succeeded', received: due, excess: 0n }])
    expect(answers.map((a) => a.error?.code)).toEqual([-32016])
    expect((await paymentRow(live, paid.paymentId)).tx_id).toBe(paid.signature)
  })

  it('a later pass: a listed transfer the node behind does not have stops the pass, and the next pass finds it', async () => {
    const paid = await pushPaid()
    live.proxy.inject('getTransaction', nodeBehind(paid.slot - 1), { times: 1 })
    await expect(scan()).rejects.toThrow(/listed but not found/)
    expect((await paymentRow(live, paid.paymentId)).status).not.toBe('succeeded')
    expect(await scan()).toEqual([{ kind: 'succeeded', received: due, excess: 0n }])
    expect((await paymentRow(live, paid.paymentId)).tx_id).toBe(paid.signature)
  })
})
