import { Keypair, SystemProgram, Transaction } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createSolanaChain } from '../../src/server/chains/solana/chain.js'
import { encodeBase58 } from '../../src/server/chains/solana/keys.js'
import { recordTransaction } from '../../src/server/chains/solana/store.js'
import { createSolanaWatcher } from '../../src/server/chains/solana/watcher.js'
import { onChain, type SolanaLive, startSolanaLive } from './live.js'

/**
 * Confirm sends a payment's transaction as soon as its request commits, and its job may send it too: the
 * watcher's send is what keeps "recorded before sent, sent once" true for both. A transaction that is not
 * recorded (its confirm rolled back) is never sent; a second send within the re-send interval is the first.
 */
let live: SolanaLive
beforeAll(async () => {
  live = await startSolanaLive()
})
afterAll(async () => {
  await live?.close()
})

describe('the watcher sends only what is recorded', () => {
  it('refuses to send an unrecorded transaction, sends a recorded one once however often asked', async () => {
    const chain = createSolanaChain({
      caip2: live.caip2,
      rpcUrls: [live.proxy.url],
      service: live.service,
      assets: [],
    })
    const watcher = createSolanaWatcher(live.t.db, chain)
    const { blockhash, lastValidBlockHeight } = await live.validator.connection.getLatestBlockhash()
    const transfer = new Transaction({
      feePayer: live.service.publicKey,
      blockhash,
      lastValidBlockHeight,
    }).add(
      SystemProgram.transfer({
        fromPubkey: live.service.publicKey,
        toPubkey: Keypair.generate().publicKey,
        lamports: 1_000_000,
      }),
    )
    transfer.sign(live.service)
    const raw = transfer.serialize().toString('base64')
    const signature = encodeBase58(transfer.signature!)
    const inFlight = () => ({
      signature,
      raw,
      blockhash,
      lastValidBlockHeight,
      sentAt: undefined,
      error: null,
    })
    const sends = live.proxy.calls('sendTransaction')

    await watcher.send(inFlight())
    expect(live.proxy.calls('sendTransaction')).toBe(sends)
    expect(await onChain(live, signature)).toBe(false)

    const merchantId = await live.createMerchant()
    const { paymentId } = await live.createPayment(merchantId)
    await recordTransaction(
      live.t.db,
      { signature, paymentId, purpose: 'payment', chainId: live.caip2, raw, blockhash, lastValidBlockHeight },
      new Date(),
    )
    await Promise.all([watcher.send(inFlight()), watcher.send(inFlight())])
    await watcher.send(inFlight())
    expect(live.proxy.calls('sendTransaction')).toBe(sends + 1)
    const row = await live.t.db
      .selectFrom('solana_transactions')
      .select(['send_count', 'first_sent_at'])
      .where('signature', '=', signature)
      .executeTakeFirstOrThrow()
    expect(row.send_count).toBe(1)
    expect(row.first_sent_at).not.toBeNull()
  })
})
