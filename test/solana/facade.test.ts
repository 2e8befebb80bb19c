import {
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
  getMint,
  TOKEN_PROGRAM_ID,
} from '@solana/spl-token'
import {
  Keypair,
  LAMPORTS_PER_SOL,
  PublicKey,
  SendTransactionError,
  SystemProgram,
  sendAndConfirmTransaction,
  Transaction,
} from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import WebSocket from 'ws'
import {
  airdrop,
  confirmSignature,
  createTestMint,
  mintTestTokens,
  type SolanaValidator,
  startSolanaValidator,
  tokenBalance,
} from './index.js'

let validator: SolanaValidator
const payer = Keypair.generate()
const alice = Keypair.generate()
const bob = Keypair.generate()
let mint: PublicKey

// biome-ignore lint/suspicious/noExplicitAny: loosely typed JSON-RPC replies, checked by assertions
async function rpc(body: unknown): Promise<any> {
  const response = await fetch(validator.rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  return response.json()
}

async function transferTx(amount: bigint, from = alice, blockhash?: string): Promise<Transaction> {
  const tx = new Transaction({
    feePayer: from.publicKey,
    ...(blockhash
      ? { recentBlockhash: blockhash }
      : { blockhash: (await validator.connection.getLatestBlockhash()).blockhash, lastValidBlockHeight: 0 }),
  })
  tx.add(
    createTransferCheckedInstruction(
      getAssociatedTokenAddressSync(mint, from.publicKey),
      mint,
      getAssociatedTokenAddressSync(mint, bob.publicKey),
      from.publicKey,
      amount,
      6,
    ),
  )
  tx.sign(from)
  return tx
}

async function sendError(raw: Uint8Array | Buffer, skipPreflight = false): Promise<SendTransactionError> {
  const error = await validator.connection.sendRawTransaction(raw, { skipPreflight }).catch((e: unknown) => e)
  expect(error).toBeInstanceOf(SendTransactionError)
  return error as SendTransactionError
}

beforeAll(async () => {
  validator = await startSolanaValidator({ backend: 'litesvm' })
  await airdrop(validator.connection, payer.publicKey, 100 * LAMPORTS_PER_SOL)
  await airdrop(validator.connection, alice.publicKey, LAMPORTS_PER_SOL)
  mint = await createTestMint(validator.connection, payer)
  await mintTestTokens(validator.connection, payer, mint, alice.publicKey, 1_000_000_000n)
  await mintTestTokens(validator.connection, payer, mint, bob.publicKey, 0n)
})

afterAll(async () => {
  await validator?.stop()
})

describe('litesvm JSON-RPC facade', () => {
  it('identifies the cluster like a validator', async () => {
    const genesisHash = await validator.connection.getGenesisHash()
    expect(genesisHash).toBe(validator.genesisHash)
    expect(validator.caip2).toBe(`solana:${genesisHash.slice(0, 32)}`)
    expect(validator.backend).toBe('litesvm')
    expect((await validator.connection.getVersion())['solana-core']).toMatch(/^\d+\.\d+\.\d+$/)
    expect(await rpc({ jsonrpc: '2.0', id: 1, method: 'getHealth' })).toMatchObject({ result: 'ok' })
  })

  it('airdrops, creates a mint and mints tokens through unchanged web3.js and spl-token', async () => {
    expect(await validator.connection.getBalance(payer.publicKey)).toBeGreaterThan(99 * LAMPORTS_PER_SOL)
    const info = await getMint(validator.connection, mint)
    expect(info.decimals).toBe(6)
    expect(info.supply).toBe(1_000_000_000n)
    expect(await tokenBalance(validator.connection, alice.publicKey, mint)).toBe(1_000_000_000n)
    expect(await tokenBalance(validator.connection, Keypair.generate().publicKey, mint)).toBe(0n)
    const ata = getAssociatedTokenAddressSync(mint, alice.publicKey)
    const balance = await validator.connection.getTokenAccountBalance(ata)
    expect(balance.value).toMatchObject({ amount: '1000000000', decimals: 6, uiAmountString: '1000' })
    const owned = await validator.connection.getTokenAccountsByOwner(alice.publicKey, { mint })
    expect(owned.value.map((a) => a.pubkey.toBase58())).toEqual([ata.toBase58()])
    expect(await validator.connection.getMinimumBalanceForRentExemption(165)).toBe(2_039_280)
  })

  it('sends and confirms a token transfer with sendAndConfirmTransaction', async () => {
    const slotBefore = await validator.connection.getSlot()
    const before = await tokenBalance(validator.connection, bob.publicKey, mint)
    const tx = await transferTx(2_500_000n)
    const signature = await sendAndConfirmTransaction(validator.connection, tx, [alice])
    expect(await tokenBalance(validator.connection, bob.publicKey, mint)).toBe(before + 2_500_000n)
    expect(await validator.connection.getSlot()).toBeGreaterThan(slotBefore)

    const status = (await validator.connection.getSignatureStatuses([signature])).value[0]
    expect(status).toMatchObject({ err: null, confirmationStatus: 'finalized' })
    const landed = await validator.connection.getTransaction(signature, { maxSupportedTransactionVersion: 0 })
    expect(landed?.meta?.err).toBeNull()
    expect(landed?.meta?.fee).toBe(5000)
    expect(landed?.transaction.signatures[0]).toBe(signature)
    expect(landed?.blockTime).toBeGreaterThan(Date.now() / 1000 - 60)
  })

  it('rejects a bad signature, an unknown blockhash and a replay like a validator', async () => {
    const good = await transferTx(1n)
    const tampered = good.serialize()
    tampered[10] = tampered[10]! ^ 0xff
    expect((await sendError(tampered)).message).toMatch(/signature verification failure/)

    const unknown = await transferTx(1n, alice, Keypair.generate().publicKey.toBase58())
    const unknownError = await sendError(unknown.serialize())
    expect(unknownError.message).toMatch(/Blockhash not found/)

    const raw = good.serialize()
    const signature = await validator.connection.sendRawTransaction(raw)
    await confirmSignature(validator.connection, signature)
    expect((await sendError(raw)).message).toMatch(/already been processed/)
  })

  it('expires blockhashes on demand', async () => {
    const { blockhash } = await validator.connection.getLatestBlockhash()
    const stale = await transferTx(1n, alice, blockhash)
    await validator.expireBlockhash()
    expect((await validator.connection.isBlockhashValid(blockhash)).value).toBe(false)
    expect((await validator.connection.getLatestBlockhash()).blockhash).not.toBe(blockhash)
    expect((await sendError(stale.serialize())).message).toMatch(/Blockhash not found/)
    const fresh = await transferTx(1n)
    await sendAndConfirmTransaction(validator.connection, fresh, [alice])
  })

  it('fails preflight with -32002 and logs, and lands a failing transaction when preflight is skipped', async () => {
    const tooMuch = await transferTx(10n ** 15n)
    const error = await sendError(tooMuch.serialize())
    expect(error.message).toMatch(/Transaction simulation failed: Error processing Instruction 0/)
    expect(error.logs?.join('\n')).toMatch(/insufficient funds/i)
    const raw = await rpc({
      jsonrpc: '2.0',
      id: 1,
      method: 'sendTransaction',
      params: [tooMuch.serialize().toString('base64'), { encoding: 'base64' }],
    })
    expect(raw.error).toMatchObject({ code: -32002, data: { err: { InstructionError: [0, { Custom: 1 }] } } })

    const lamportsBefore = await validator.connection.getBalance(alice.publicKey)
    const signature = await validator.connection.sendRawTransaction(tooMuch.serialize(), {
      skipPreflight: true,
    })
    const status = (await validator.connection.getSignatureStatuses([signature])).value[0]
    expect(status?.err).toEqual({ InstructionError: [0, { Custom: 1 }] })
    expect(await validator.connection.getBalance(alice.publicKey)).toBe(lamportsBefore - 5000)
  })

  it('simulates without signatures and estimates fees', async () => {
    const tx = new Transaction({
      feePayer: alice.publicKey,
      ...(await validator.connection.getLatestBlockhash()),
    }).add(
      SystemProgram.transfer({ fromPubkey: alice.publicKey, toPubkey: bob.publicKey, lamports: 10_000_000 }),
    )
    const simulated = await validator.connection.simulateTransaction(tx)
    expect(simulated.value.err).toBeNull()
    expect(simulated.value.logs?.[0]).toMatch(/invoke \[1\]/)
    expect((await validator.connection.getFeeForMessage(tx.compileMessage())).value).toBe(5000)

    // Rent rules hold: a transfer that leaves a new account below the rent-exempt minimum fails.
    const dust = new Transaction({
      feePayer: alice.publicKey,
      ...(await validator.connection.getLatestBlockhash()),
    })
    dust.add(
      SystemProgram.transfer({
        fromPubkey: alice.publicKey,
        toPubkey: Keypair.generate().publicKey,
        lamports: 1000,
      }),
    )
    expect((await validator.connection.simulateTransaction(dust)).value.err).toEqual({
      InsufficientFundsForRent: { account_index: 1 },
    })
  })

  it('answers batches and rejects unknown methods with -32601', async () => {
    const results = await rpc([
      { jsonrpc: '2.0', id: 1, method: 'getSlot' },
      { jsonrpc: '2.0', id: 2, method: 'getGenesisHash' },
      { jsonrpc: '2.0', id: 3, method: 'getBlockProduction' },
    ])
    expect(results).toHaveLength(3)
    expect(results[0]).toMatchObject({ id: 1, result: expect.any(Number) })
    expect(results[1]).toMatchObject({ id: 2, result: validator.genesisHash })
    expect(results[2]).toMatchObject({ id: 3, error: { code: -32601 } })
    expect(await rpc({ jsonrpc: '2.0', id: 9, method: 'nope' })).toMatchObject({ error: { code: -32601 } })
    expect(await rpc([])).toMatchObject({ error: { code: -32600 } })
  })

  it('notifies signatureSubscribe over WebSocket', async () => {
    const socket = new WebSocket(validator.wsUrl)
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject))
    // biome-ignore lint/suspicious/noExplicitAny: loosely typed JSON-RPC messages, checked by assertions
    const messages: any[] = []
    const next = () =>
      // biome-ignore lint/suspicious/noExplicitAny: as above
      new Promise<any>((resolve) => {
        if (messages.length) return resolve(messages.shift())
        socket.once('message', () => resolve(messages.shift()))
      })
    socket.on('message', (data) => messages.push(JSON.parse(data.toString())))

    const tx = await transferTx(3n)
    const signature = tx.signatures[0]!.signature!
    const { default: bs58 } = await import('bs58')
    socket.send(
      JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'signatureSubscribe',
        params: [bs58.encode(signature)],
      }),
    )
    const subscribed = await next()
    expect(subscribed).toMatchObject({ id: 1, result: expect.any(Number) })
    await validator.connection.sendRawTransaction(tx.serialize())
    const notification = await next()
    expect(notification).toMatchObject({
      method: 'signatureNotification',
      params: { subscription: subscribed.result, result: { value: { err: null } } },
    })

    socket.send(
      JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'signatureUnsubscribe', params: [subscribed.result] }),
    )
    expect(await next()).toMatchObject({ id: 2, error: { code: -32602 } })
    socket.close()

    // The same through web3.js's own subscription API.
    const tx2 = await transferTx(4n)
    const seen = new Promise((resolve) =>
      validator.connection.onSignature(bs58.encode(tx2.signatures[0]!.signature!), (result) =>
        resolve(result),
      ),
    )
    await validator.connection.sendRawTransaction(tx2.serialize())
    expect(await seen).toEqual({ err: null })
  })

  it('stops cleanly, closing WebSockets with code 1000', async () => {
    const other = await startSolanaValidator({
      backend: 'litesvm',
      genesisHash: PublicKey.unique().toBase58(),
    })
    expect(other.caip2).not.toBe(validator.caip2)
    const socket = new WebSocket(other.wsUrl)
    await new Promise((resolve) => socket.once('open', resolve))
    const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)))
    await other.stop()
    expect(await closed).toBe(1000)
    await expect(fetch(other.rpcUrl, { method: 'POST', body: '{}' })).rejects.toThrow()
  })
})

describe('token program ids', () => {
  it('lists the signatures touching an address, newest first, and reports token balance changes', async () => {
    const bobAccount = getAssociatedTokenAddressSync(mint, bob.publicKey)
    const first = await sendAndConfirmTransaction(validator.connection, await transferTx(1_000n), [alice])
    const second = await sendAndConfirmTransaction(validator.connection, await transferTx(2_000n), [alice])
    const listed = await validator.connection.getSignaturesForAddress(bobAccount, { limit: 2 })
    expect(listed.map((entry) => entry.signature)).toEqual([second, first])
    expect(listed[0]).toMatchObject({ err: null, confirmationStatus: 'finalized' })
    const older = await validator.connection.getSignaturesForAddress(bobAccount, {
      before: second,
      until: first,
    })
    expect(older).toEqual([])
    expect(await validator.connection.getSignaturesForAddress(Keypair.generate().publicKey)).toEqual([])

    const landed = await validator.connection.getTransaction(second, { maxSupportedTransactionVersion: 0 })
    const keys = landed!.transaction.message.staticAccountKeys
    const change = (
      balances: { accountIndex: number; uiTokenAmount: { amount: string } }[] | null | undefined,
    ) => {
      const entry = balances!.find((b) => keys[b.accountIndex]!.equals(bobAccount))!
      expect(entry).toMatchObject({ mint: mint.toBase58(), owner: bob.publicKey.toBase58() })
      return BigInt(entry.uiTokenAmount.amount)
    }
    expect(change(landed!.meta!.postTokenBalances) - change(landed!.meta!.preTokenBalances)).toBe(2_000n)

    const slot = await validator.connection.getSlot()
    const refused = await rpc({
      jsonrpc: '2.0',
      id: 1,
      method: 'getSignaturesForAddress',
      params: [bobAccount.toBase58(), { minContextSlot: slot + 10 }],
    })
    expect(refused.error).toMatchObject({ code: -32016 })
  })

  it('uses the classic SPL Token program by default', async () => {
    const info = await validator.connection.getAccountInfo(mint)
    expect(info?.owner.equals(TOKEN_PROGRAM_ID)).toBe(true)
  })
})

describe('the clocked harness (slotMs), as a cluster', () => {
  it('a transaction is processed in its slot, confirmed once the slot is over; getTransaction answers only then', async () => {
    const clocked = await startSolanaValidator({ backend: 'litesvm', slotMs: 1_000 })
    try {
      const { connection } = clocked
      const from = Keypair.generate()
      await airdrop(connection, from.publicKey, LAMPORTS_PER_SOL)
      const { blockhash, lastValidBlockHeight } = await connection.getLatestBlockhash()
      const tx = new Transaction({ feePayer: from.publicKey, blockhash, lastValidBlockHeight }).add(
        SystemProgram.transfer({
          fromPubkey: from.publicKey,
          toPubkey: bob.publicKey,
          lamports: LAMPORTS_PER_SOL / 10,
        }),
      )
      tx.sign(from)
      // Sent right after a slot begins, so the reads below fall in the same slot (a second long).
      const slot = await connection.getSlot()
      while ((await connection.getSlot()) === slot) await new Promise((resolve) => setTimeout(resolve, 10))
      const signature = await connection.sendRawTransaction(tx.serialize())
      const landed = (await connection.getSignatureStatuses([signature])).value[0]
      expect(landed).toMatchObject({ confirmationStatus: 'processed', confirmations: 0, err: null })
      expect(
        await connection.getTransaction(signature, {
          commitment: 'confirmed',
          maxSupportedTransactionVersion: 0,
        }),
      ).toBeNull()
      await expect
        .poll(async () => (await connection.getSignatureStatuses([signature])).value[0]?.confirmationStatus, {
          timeout: 5_000,
        })
        .toBe('confirmed')
      const read = await connection.getTransaction(signature, {
        commitment: 'confirmed',
        maxSupportedTransactionVersion: 0,
      })
      expect(read?.slot).toBe(landed!.slot)
    } finally {
      await clocked.stop()
    }
  })
})
