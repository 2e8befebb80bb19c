/**
 * Issue 43: the review is built from the signing guard's own decoding. A gateway whose display texts
 * lie (amount, symbol, decimals, asset name, merchant) changes nothing in it but the merchant it claims,
 * for every action kind the guard accepts, on EVM and Solana; and it shows exactly what the guard
 * approved. Real adapters decode real payloads; nothing here is signed or sent.
 */
import {
  createAssociatedTokenAccountIdempotentInstruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
} from '@solana/spl-token'
import {
  ComputeBudgetProgram,
  Keypair,
  PublicKey,
  TransactionMessage,
  VersionedTransaction,
} from '@solana/web3.js'
import { Ajv } from 'ajv'
import ajvFormats from 'ajv-formats'
import { type Address, decodeFunctionData, encodeFunctionData, erc20Abi, getAddress } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { describe, expect, it } from 'vitest'
import { evmSigner } from '../../adapters/evm/index.js'
import { solanaSigner } from '../../adapters/solana/index.js'
import caipayWitness from '../../descriptors/erc7730/eip712-caipay-permit2-witness.json' with { type: 'json' }
import erc20Descriptor from '../../fixtures/erc7730/calldata-erc20-tokens.json' with { type: 'json' }
import permitDescriptor from '../../fixtures/erc7730/eip712-erc2612-permit.json' with { type: 'json' }
import receiveDescriptor from '../../fixtures/erc7730/eip712-ReceiveWithAuthorization.json' with {
  type: 'json',
}
import transferDescriptor from '../../fixtures/erc7730/eip712-TransferWithAuthorization.json' with {
  type: 'json',
}
import schema from '../../fixtures/erc7730/erc7730-v2.schema.json' with { type: 'json' }
import {
  authorizationFields,
  permit2Address,
  permit2TypedData,
  permitFields,
} from '../../protocol/evm/index.js'
import { guardActions } from '../../src/actions/guard.js'
import { createSignerRegistry } from '../../src/actions/registry.js'
import { routeActions } from '../../src/actions/route.js'
import type { Signer } from '../../src/actions/types.js'
import type { PaymentOption, WalletRpcAction } from '../../src/contract/gateway.js'
import { PayError } from '../../src/errors/PayError.js'
import { cancelled, paymentId, processing, setup } from '../../src/flow/flowHarness.js'
import { build, rpc, scriptedGateway } from '../../src/flow/testkit.js'
import { createPayClient } from '../../src/pay/createPayClient.js'
import { createReviewer, type PaymentReview } from '../../src/review/index.js'

const chain = 'eip155:8453'
const token = getAddress('0x833589fcd6edb6e08f4c7c32d4f71b54bda02913')
const usdc = `${chain}/erc20:${token}`
const payer = privateKeyToAccount(generatePrivateKey())
const payerAccount = `${chain}:${payer.address}`
const merchant = privateKeyToAccount(generatePrivateKey()).address
const merchantAccount = `${chain}:${merchant}`
const permit2Account = `${chain}:${permit2Address}`
const smartAccount = getAddress('0x5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a')
const validBefore = 1_900_000_000
const validAfter = 1_800_000_000

const solChain = 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp'
const buyer = Keypair.generate()
const service = Keypair.generate()
const mint = Keypair.generate().publicKey
const usdcSol = `${solChain}/token:${mint.toBase58()}`

/** The wallet's own list: the only place the review takes symbols and decimals from here. */
const assets = [
  { asset: usdc.toLowerCase(), symbol: 'USDC', decimals: 6 },
  { asset: usdcSol, symbol: 'USDC', decimals: 6 },
  { asset: `${solChain}/slip44:501`, symbol: 'SOL', decimals: 9 },
]

const evm = (account = payerAccount) =>
  account === payerAccount
    ? evmSigner({
        account: payer,
        chains: { [chain]: { rpcUrl: 'http://127.0.0.1:9' } },
        spenders: [merchantAccount, permit2Account],
      })
    : // A smart account's wallet (EIP-1193): it signs typed data as itself, so it is its own payer.
      evmSigner({
        provider: { request: () => Promise.reject(new Error('nothing is signed in a review')) },
        accounts: [account],
      })

const typed = (from: Address, primaryType: string, message: Record<string, unknown>) =>
  rpc(chain, 'eth_signTypedData_v4', [
    from,
    JSON.stringify({
      types: {
        EIP712Domain: [
          { name: 'name', type: 'string' },
          { name: 'version', type: 'string' },
          { name: 'chainId', type: 'uint256' },
          { name: 'verifyingContract', type: 'address' },
        ],
        [primaryType]: primaryType === 'Permit' ? permitFields : authorizationFields,
      },
      primaryType,
      domain: { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: token },
      message,
    }),
  ])
const authorization = (kind: string, from: Address = payer.address) =>
  typed(from, kind, {
    from,
    to: merchant,
    value: '1000000',
    validAfter: String(validAfter),
    validBefore: String(validBefore),
    nonce: `0x${'ab'.repeat(32)}`,
  })
const send = (functionName: 'transfer' | 'approve', to: Address, amount: bigint) =>
  rpc(chain, 'eth_sendTransaction', [
    {
      from: payer.address,
      to: token,
      data: encodeFunctionData({ abi: erc20Abi, functionName, args: [to, amount] }),
    },
  ])
const permit2 = rpc(chain, 'eth_signTypedData_v4', [
  payer.address,
  JSON.stringify(
    permit2TypedData({
      chainId: 8453,
      token,
      amount: 1_000_000n,
      spender: merchant,
      nonce: 7n,
      deadline: BigInt(validBefore),
      to: merchant,
      validAfter: 0n,
    }),
    (_, value) => (typeof value === 'bigint' ? value.toString() : value),
  ),
])

/** What a service builds on Solana: an SPL transferChecked from the buyer's token account. */
function solanaPayment(feePayer: Keypair, unitPrice = 0): WalletRpcAction {
  const source = getAssociatedTokenAddressSync(mint, buyer.publicKey)
  const collection = getAssociatedTokenAddressSync(mint, service.publicKey)
  const instructions = [
    ComputeBudgetProgram.setComputeUnitLimit({ units: 100_000 }),
    ...(unitPrice > 0 ? [ComputeBudgetProgram.setComputeUnitPrice({ microLamports: unitPrice })] : []),
    createAssociatedTokenAccountIdempotentInstruction(service.publicKey, collection, service.publicKey, mint),
    createTransferCheckedInstruction(source, mint, collection, buyer.publicKey, 1_000_000n, 6),
  ]
  const message = new TransactionMessage({
    payerKey: feePayer.publicKey,
    recentBlockhash: new PublicKey(Keypair.generate().publicKey.toBytes()).toBase58(),
    instructions,
  }).compileToV0Message()
  const transaction = Buffer.from(new VersionedTransaction(message).serialize()).toString('base64')
  return rpc(solChain, 'solana_signTransaction', [{ transaction }])
}
const solana = (allowFeePayer = false) =>
  solanaSigner({ keypair: buyer, chains: [solChain], allowFeePayer, maxFeeLamports: 10_000_000n })

interface Case {
  name: string
  signer: () => Signer
  account: string
  asset: string
  actions: WalletRpcAction[]
  /** The truth, read off the payload by hand. */
  expected: Partial<PaymentReview>
}

const usdcShown = { id: usdc, symbol: 'USDC', decimals: 6, source: 'wallet' as const }
const solShown = { id: usdcSol, symbol: 'USDC', decimals: 6, source: 'wallet' as const }
const solFee = { id: `${solChain}/slip44:501`, symbol: 'SOL', decimals: 9, source: 'wallet' as const }

const cases: Case[] = [
  ...(['TransferWithAuthorization', 'ReceiveWithAuthorization'] as const).map(
    (kind): Case => ({
      name: `EIP-3009 ${kind}`,
      signer: () => evm(),
      account: payerAccount,
      asset: usdc,
      actions: [authorization(kind)],
      expected: {
        actions: [
          {
            index: 0,
            chainId: chain,
            method: 'eth_signTypedData_v4',
            intent: 'authorize',
            from: payerAccount,
            moves: [{ asset: usdcShown, amount: 1_000_000n, to: merchantAccount, spender: undefined }],
            validFrom: validAfter,
            validUntil: validBefore,
            fee: 'none',
          },
        ],
        total: { asset: usdcShown, amount: 1_000_000n },
        maxFees: [],
        walletSetsFees: false,
        validUntil: validBefore,
      },
    }),
  ),
  {
    name: 'EIP-2612 Permit to an allow-listed spender',
    signer: () => evm(),
    account: payerAccount,
    asset: usdc,
    actions: [
      typed(payer.address, 'Permit', {
        owner: payer.address,
        spender: merchant,
        value: '1000000',
        nonce: '0',
        deadline: String(validBefore),
      }),
    ],
    expected: {
      actions: [
        expect.objectContaining({
          intent: 'permit',
          from: payerAccount,
          moves: [{ asset: usdcShown, amount: 1_000_000n, spender: merchantAccount }],
          validUntil: validBefore,
          fee: 'none',
        }),
      ],
      total: { asset: usdcShown, amount: 1_000_000n },
    },
  },
  {
    name: 'ERC-20 approve of Permit2, then a Permit2 witness transfer (counted once)',
    signer: () => evm(),
    account: payerAccount,
    asset: usdc,
    actions: [send('approve', permit2Address, 1_000_000n), permit2],
    expected: {
      actions: [
        expect.objectContaining({
          intent: 'approve',
          moves: [{ asset: usdcShown, amount: 1_000_000n, spender: permit2Account }],
          fee: 'wallet',
        }),
        expect.objectContaining({
          intent: 'permit2',
          moves: [{ asset: usdcShown, amount: 1_000_000n, to: merchantAccount, spender: permit2Account }],
          validUntil: validBefore,
          fee: 'none',
        }),
      ],
      total: { asset: usdcShown, amount: 1_000_000n },
      walletSetsFees: true,
    },
  },
  {
    name: 'ERC-20 transfer',
    signer: () => evm(),
    account: payerAccount,
    asset: usdc,
    actions: [send('transfer', merchant, 1_000_000n)],
    expected: {
      actions: [
        expect.objectContaining({
          intent: 'transfer',
          from: payerAccount,
          moves: [{ asset: usdcShown, amount: 1_000_000n, to: merchantAccount, spender: undefined }],
          fee: 'wallet',
        }),
      ],
      walletSetsFees: true,
    },
  },
  {
    name: 'a smart account’s EIP-3009 authorization',
    signer: () => evm(`${chain}:${smartAccount}`),
    account: `${chain}:${smartAccount}`,
    asset: usdc,
    actions: [authorization('TransferWithAuthorization', smartAccount)],
    expected: {
      actions: [
        expect.objectContaining({
          intent: 'authorize',
          from: `${chain}:${smartAccount}`,
          moves: [{ asset: usdcShown, amount: 1_000_000n, to: merchantAccount, spender: undefined }],
        }),
      ],
    },
  },
  {
    name: 'Solana transferChecked, the service paying fees',
    signer: () => solana(),
    account: `${solChain}:${buyer.publicKey.toBase58()}`,
    asset: usdcSol,
    actions: [solanaPayment(service)],
    expected: {
      actions: [
        expect.objectContaining({
          intent: 'transfer',
          from: `${solChain}:${buyer.publicKey.toBase58()}`,
          moves: [
            {
              asset: solShown,
              amount: 1_000_000n,
              to: `${solChain}:${service.publicKey.toBase58()}`,
              spender: undefined,
            },
          ],
          fee: 'none',
        }),
      ],
      maxFees: [],
      walletSetsFees: false,
    },
  },
  {
    name: 'Solana transferChecked, the wallet paying fees (bounded by the bytes)',
    signer: () => solana(true),
    account: `${solChain}:${buyer.publicKey.toBase58()}`,
    asset: usdcSol,
    actions: [solanaPayment(buyer, 50_000)],
    expected: {
      // Two signatures (the buyer's, and the service's for the token account it creates) x 5000, plus
      // ceil(100 000 units x 50 000 micro-lamports / 10^6) = 5000.
      actions: [expect.objectContaining({ fee: { asset: solFee, max: 15_000n } })],
      maxFees: [{ asset: solFee, max: 15_000n }],
    },
  },
]

function offer(c: Case, lying: boolean): PaymentOption {
  return {
    id: 'opt_1',
    account: c.account,
    amount: {
      unit: `caip19/${c.asset}`,
      // The lie: five times the amount, another token's name, symbol and decimals. Solana's decimals
      // are in the signed bytes, so that lie is refused outright (tested below) and left out here.
      value: lying ? '5000000' : '1000000',
      display: lying
        ? { assetName: 'Tether USD', assetSymbol: 'USDT', decimals: c.asset === usdcSol ? 6 : 18 }
        : { assetName: 'USD Coin', assetSymbol: 'USDC', decimals: 6 },
    },
    etaS: 5,
    expiresAt: 2_000_000_000,
    actions: c.actions,
  }
}

async function reviewOf(c: Case, lying: boolean, signer = c.signer()) {
  const option = offer(c, lying)
  const info = {
    paymentId,
    status: 'requires_action' as const,
    amount: option.amount,
    expiresAt: 2_000_000_000,
    merchant: { name: lying ? 'Your Bank (verified)' : 'Corner Coffee', iconUrl: null },
  }
  const run = setup({
    options: [option],
    response: { info },
    signers: [signer],
    flow: { review: createReviewer({ assets }) },
  })
  await run.flow.loadOptions()
  run.flow.select(option.id)
  const review = await run.flow.review()
  expect(run.flow.state).toBe('signing')
  return { review, emitted: run.of('review'), flow: run.flow, option }
}

describe('the review', () => {
  describe.each(cases)('$name', (c) => {
    it('shows what the payload does; a gateway lying in its display texts changes only the merchant it claims', async () => {
      const honest = await reviewOf(c, false)
      const lied = await reviewOf(c, true)
      expect(honest.review).toMatchObject({ optionId: 'opt_1', ...c.expected })
      const { claimedByService: honestClaim, ...shown } = honest.review
      const { claimedByService: liedClaim, ...shownToo } = lied.review
      expect(shownToo).toEqual(shown)
      expect(honestClaim).toEqual({ merchant: 'Corner Coffee' })
      expect(liedClaim).toEqual({ merchant: 'Your Bank (verified)' })
      expect(JSON.stringify(lied.review, (_, v) => (typeof v === 'bigint' ? `${v}` : v))).not.toMatch(
        /USDT|Tether|5000000/,
      )
      expect(lied.emitted).toEqual([lied.review])
    })

    it('equals what the guard approved: the same decoding, action by action, and its total', async () => {
      const signer = c.signer()
      const { review, option } = await reviewOf(c, false, signer)
      const approved = await guardActions(routeActions(createSignerRegistry([signer]), c.actions), {
        accounts: [c.account],
        account: c.account,
        amount: option.amount,
      })
      expect(review.total?.amount ?? 0n).toBe(approved.total)
      expect(review.actions.map((a) => [a.index, a.from, a.validUntil, a.validFrom])).toEqual(
        approved.actions.map((a) => [
          a.index,
          a.inspection.account,
          a.inspection.validUntil,
          a.inspection.validFrom,
        ]),
      )
      expect(
        review.actions.map((a) => a.moves.map((m) => [m.asset.id, m.amount, m.to ?? m.spender])),
      ).toEqual(approved.actions.map((a) => a.inspection.transfers.map((t) => [t.asset, t.amount, t.to])))
    })
  })

  it('a Solana option whose display decimals lie is refused before any review', async () => {
    const c = cases.find((k) => k.asset === usdcSol)!
    const option = {
      ...offer(c, false),
      amount: {
        ...offer(c, false).amount,
        display: { assetName: 'USD Coin', assetSymbol: 'USDC', decimals: 9 },
      },
    }
    const run = setup({
      options: [option],
      signers: [c.signer()],
      flow: { review: createReviewer({ assets }) },
    })
    await run.flow.loadOptions()
    run.flow.select(option.id)
    await expect(run.flow.review()).rejects.toMatchObject({ code: 'action_rejected' })
    expect(run.of('review')).toEqual([])
    expect(run.flow.state).toBe('failed')
  })

  it('without a wallet list, symbols come from the signer’s node, else the bytes’ own decimals, never the gateway', async () => {
    const c = cases.find((k) => k.name.startsWith('Solana transferChecked, the service'))!
    const run = setup({
      options: [offer(c, true)],
      signers: [c.signer()],
      flow: { review: createReviewer() },
    })
    await run.flow.loadOptions()
    run.flow.select('opt_1')
    const review = await run.flow.review()
    expect(review.actions[0]!.moves[0]!.asset).toEqual({ id: usdcSol, decimals: 6, source: 'action' })
    const e = cases[0]!
    const node = { ...e.signer(), describeAsset: async () => ({ symbol: 'USDC', decimals: 6 }) }
    const onNode = setup({ options: [offer(e, true)], signers: [node], flow: { review: createReviewer() } })
    await onNode.flow.loadOptions()
    onNode.flow.select('opt_1')
    expect((await onNode.flow.review()).total?.asset).toEqual({
      id: usdc,
      symbol: 'USDC',
      decimals: 6,
      source: 'node',
    })
  })

  it('execute() reviews once, and a refusal from onReview cancels as a user rejection with nothing signed', async () => {
    const c = cases[0]!
    const signer = c.signer()
    let asked: PaymentReview | undefined
    const requests: unknown[] = []
    const watched: Signer = {
      ...signer,
      request: (request) => {
        requests.push(request)
        return signer.request(request)
      },
    }
    const run = setup({
      options: [offer(c, false)],
      signers: [watched],
      gateway: { cancel: async () => cancelled },
      flow: {
        review: createReviewer({ assets }),
        onReview: (review) => {
          asked = review
          return false
        },
      },
    })
    await run.flow.loadOptions()
    run.flow.select('opt_1')
    const result = await run.flow.execute()
    expect(result.status).toBe('cancelled')
    expect(run.errorCodes()).toEqual(['user_rejected'])
    expect(run.of('review')).toEqual([asked])
    expect(requests).toEqual([])
  })

  it('execute() called while review() works signs after it, once, exactly what was reviewed', async () => {
    const c = cases[0]!
    const signer = c.signer()
    const signed: unknown[] = []
    const counting: Signer = {
      ...signer,
      request: (r) => {
        signed.push(r.params)
        return signer.request(r)
      },
    }
    // Built by the service on demand: the actions come from one fetch, which a second job would repeat.
    const run = setup({
      options: [{ ...offer(c, false), actions: [build('bld_1')] }],
      gateway: { fetchActions: async () => ({ actions: c.actions }) },
      signers: [counting],
      flow: { review: createReviewer({ assets }) },
    })
    await run.flow.loadOptions()
    run.flow.select('opt_1')
    const [review, result] = await Promise.all([run.flow.review(), run.flow.execute()])
    expect(result.status).toBe('succeeded')
    expect(run.gateway.callsTo('fetchActions')).toHaveLength(1)
    expect(run.of('review')).toEqual([review])
    expect(signed).toHaveLength(1)
  })

  it('after quote_expired, the rebuilt round is reviewed again: the new actions, nothing of the first', async () => {
    // Round 1 pays one payee until one time; the rebuild (the first signature proved dead by the node,
    // docs/exposure.md) pays another payee, half the amount, in a later window.
    const otherPayee = privateKeyToAccount(generatePrivateKey()).address
    const rounds = [
      typed(payer.address, 'TransferWithAuthorization', {
        from: payer.address,
        to: merchant,
        value: '1000000',
        validAfter: String(validAfter),
        validBefore: String(validBefore),
        nonce: `0x${'01'.repeat(32)}`,
      }),
      typed(payer.address, 'TransferWithAuthorization', {
        from: payer.address,
        to: otherPayee,
        value: '500000',
        validAfter: String(validAfter + 600),
        validBefore: String(validBefore + 600),
        nonce: `0x${'02'.repeat(32)}`,
      }),
    ]
    const signer = evm()
    const events: string[] = []
    const watched: Signer = {
      ...signer,
      signatureStatus: async () => 'dead',
      request: (request) => {
        events.push(`sign ${JSON.parse(request.params[1] as string).message.to}`)
        return signer.request(request)
      },
    }
    let fetches = 0
    let confirms = 0
    const run = setup({
      options: [{ ...offer(cases[0]!, false), actions: [build('bld_1')] }],
      signers: [watched],
      gateway: {
        fetchActions: async () => ({ actions: [rounds[fetches++]!] }),
        confirm: async () => {
          if (++confirms === 1)
            throw new PayError({ code: 'quote_expired', message: 'Expired.', status: 422 })
          return processing
        },
      },
      flow: {
        review: createReviewer({ assets }),
        onReview: (review) => {
          events.push(`review ${review.actions[0]!.moves[0]!.to}`)
          return true
        },
      },
    })
    await run.flow.loadOptions()
    run.flow.select('opt_1')
    const result = await run.flow.execute()
    expect(result.status).toBe('succeeded')
    expect(events).toEqual([
      `review ${merchantAccount}`,
      `sign ${merchant}`,
      `review ${chain}:${otherPayee}`,
      `sign ${otherPayee}`,
    ])
    const [first, second] = run.of('review') as PaymentReview[]
    expect(run.of('review')).toHaveLength(2)
    expect(first).toMatchObject({ validUntil: validBefore, total: { amount: 1_000_000n } })
    expect(second).toMatchObject({
      optionId: 'opt_1',
      actions: [
        {
          intent: 'authorize',
          from: payerAccount,
          moves: [{ asset: usdcShown, amount: 500_000n, to: `${chain}:${otherPayee}` }],
          validFrom: validAfter + 600,
          validUntil: validBefore + 600,
        },
      ],
      total: { asset: usdcShown, amount: 500_000n },
      validUntil: validBefore + 600,
    })
    const shown = JSON.stringify(second, (_, v) => (typeof v === 'bigint' ? `${v}` : v))
    expect(shown).not.toContain(merchant)
    expect(shown).not.toContain('1000000')
    expect(shown).not.toContain(String(validBefore))
  })

  it('createPayClient passes the reviewer and onReview through', async () => {
    const c = cases[0]!
    const gateway = scriptedGateway({
      getOptions: async () => ({ options: [offer(c, false)] }),
      cancel: async () => cancelled,
    })
    const shown: PaymentReview[] = []
    const pay = createPayClient({
      gateway,
      baseUrl: 'http://127.0.0.1:8787',
      signers: [c.signer()],
      review: createReviewer({ assets }),
    })
    const result = await pay.pay(`http://127.0.0.1:8787/pay/${paymentId}`, {
      onReview: (review) => {
        shown.push(review)
        return false
      },
    })
    expect(result.status).toBe('cancelled')
    expect(shown.map((r) => r.total?.amount)).toEqual([1_000_000n])
  })

  it('review() refuses without a reviewer or before an option is chosen, leaving the flow as it was', async () => {
    const c = cases[0]!
    const bare = setup({ options: [offer(c, false)], signers: [c.signer()] })
    await bare.flow.loadOptions()
    bare.flow.select('opt_1')
    await expect(bare.flow.review()).rejects.toMatchObject({ code: 'invalid_transition' })
    const early = setup({
      options: [offer(c, false)],
      signers: [c.signer()],
      flow: { review: createReviewer() },
    })
    await early.flow.loadOptions()
    await expect(early.flow.review()).rejects.toMatchObject({ code: 'invalid_transition' })
    expect([bare.flow.state, early.flow.state]).toEqual(['selecting', 'selecting'])
  })
})

// ERC-7730: caipay's descriptor for its own typed data validates against the published schema, and for
// every payload the public registry describes (fixtures/erc7730/SOURCE.md), each field the registry shows
// shows the same in the review.
type Descriptor = {
  display: {
    formats: Record<string, { intent: string; fields: { path: string; format?: string; visible?: string }[] }>
  }
}

function validator() {
  const ajv = new Ajv({ strict: false, allErrors: true })
  // ajv-formats is CommonJS: its plugin is the module's default export.
  ;(ajvFormats as unknown as { default: (ajv: Ajv) => void }).default(ajv)
  return ajv.compile(schema)
}

/** The registry's visible fields for a payload: [format, value] with the value read at the field's path. */
function registryFields(descriptor: Descriptor, message: Record<string, unknown>) {
  const [format] = Object.values(descriptor.display.formats)
  return format!.fields
    .filter((field) => field.visible !== 'never' && field.format !== undefined)
    .map((field) => {
      const value = field.path
        .split('.')
        .reduce<unknown>((at, key) => (at as Record<string, unknown>)?.[key], message)
      return [field.format!, String(value)] as const
    })
}

/** The review action shows the registry's field: an amount it moves, an address it names, a bound it states. */
function reviewShows(
  action: PaymentReview['actions'][number],
  [format, value]: readonly [string, string],
): boolean {
  const move = action.moves[0]!
  if (format === 'tokenAmount') return move.amount === BigInt(value)
  if (format === 'date') {
    const bound = Number(value)
    return bound === 0
      ? action.validFrom === undefined
      : [action.validFrom, action.validUntil].includes(bound)
  }
  const named = [action.from, move.to, move.spender].filter(Boolean)
  return named.includes(`${action.chainId}:${getAddress(value)}`)
}

const typedMessage = (action: WalletRpcAction) =>
  JSON.parse(JSON.parse(action.walletRpc.params)[1]).message as Record<string, unknown>
const calldataArgs = (action: WalletRpcAction, names: string[]) => {
  const { args } = decodeFunctionData({ abi: erc20Abi, data: JSON.parse(action.walletRpc.params)[0].data })
  return Object.fromEntries(names.map((name, i) => [name, (args as readonly unknown[])[i]]))
}

describe('ERC-7730', () => {
  it('caipay’s descriptor of its Permit2 witness transfer validates against the ERC-7730 v2 schema', () => {
    const validate = validator()
    expect(validate(caipayWitness), JSON.stringify(validate.errors)).toBe(true)
    for (const fixture of [transferDescriptor, receiveDescriptor, permitDescriptor, erc20Descriptor])
      expect(validate(fixture), JSON.stringify(validate.errors)).toBe(true)
    // The schema has teeth: a field format ERC-7730 does not define is refused.
    const bogus = structuredClone(caipayWitness) as unknown as Descriptor
    Object.values(bogus.display.formats)[0]!.fields[0]!.format = 'moneyAmount'
    expect(validate(bogus)).toBe(false)
  })

  it('caipay’s descriptor names the witness type exactly as Permit2 hashes it', () => {
    const [key] = Object.keys(caipayWitness.display.formats)
    const typed = JSON.parse(JSON.parse(permit2.walletRpc.params)[1])
    const encode = (name: string) =>
      `${name}(${(typed.types[name] as { name: string; type: string }[]).map((f) => `${f.type} ${f.name}`).join(',')})`
    expect(key).toBe(encode('PermitWitnessTransferFrom') + encode('TokenPermissions') + encode('Witness'))
  })

  const agreements = [
    {
      kind: 'EIP-3009 TransferWithAuthorization',
      descriptor: transferDescriptor,
      c: 0,
      action: 0,
      intent: 'authorize',
    },
    {
      kind: 'EIP-3009 ReceiveWithAuthorization',
      descriptor: receiveDescriptor,
      c: 1,
      action: 0,
      intent: 'authorize',
    },
    { kind: 'EIP-2612 Permit', descriptor: permitDescriptor, c: 2, action: 0, intent: 'permit' },
    {
      kind: 'ERC-20 approve',
      descriptor: erc20Descriptor,
      c: 3,
      action: 0,
      intent: 'approve',
      call: ['_spender', '_value'],
    },
    {
      kind: 'caipay Permit2 witness transfer',
      descriptor: caipayWitness,
      c: 3,
      action: 1,
      intent: 'permit2',
    },
    {
      kind: 'ERC-20 transfer',
      descriptor: erc20Descriptor,
      c: 4,
      action: 0,
      intent: 'transfer',
      call: ['_to', '_value'],
    },
  ]
  it.each(agreements)('$kind: every field the descriptor shows, the review shows', async (a) => {
    const c = cases[a.c]!
    const { review } = await reviewOf(c, false)
    const action = review.actions[a.action]!
    expect(action.intent).toBe(a.intent)
    const wire = c.actions[a.action]!
    let descriptor = a.descriptor as unknown as Descriptor
    if (a.call) {
      // The ERC-20 descriptor describes both calls: keep the one this payload makes.
      const key = Object.keys(descriptor.display.formats).find((k) => k.startsWith(a.intent))!
      descriptor = { display: { formats: { [key]: descriptor.display.formats[key]! } } }
    }
    const message = a.call ? calldataArgs(wire, a.call) : typedMessage(wire)
    const fields = registryFields(descriptor, message)
    expect(fields.length).toBeGreaterThanOrEqual(2)
    expect(fields.filter((field) => !reviewShows(action, field))).toEqual([])
  })
})
