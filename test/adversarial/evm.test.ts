import {
  type Address,
  createPublicClient,
  createWalletClient,
  encodeFunctionData,
  erc20Abi,
  type Hex,
  http,
  maxUint256,
  type PublicClient,
  toHex,
  verifyMessage,
  verifyTypedData,
} from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { permitFields } from '../../protocol/evm/index.js'
import { isPayError } from '../../src/errors/PayError.js'
import {
  type AnvilInstance,
  anvilChain,
  anvilPrivateKeys,
  authorizationTypedData,
  deployTestToken,
  mintTestToken,
  startAnvil,
} from '../anvil.js'
import {
  type EvmPath,
  evmPaths,
  evmSignerOn,
  type Outcome,
  option,
  payAgainst,
  rpc,
  succeeded,
} from './support.js'

// The gateway is the attacker (issue 13): each case serves crafted options and fetch answers over
// HTTP to the wallet flow with a real key on every EVM signer path. A refused case must end in a
// PayError with a specific code and zero signing calls; a control must be signed and verify, so
// the suite cannot pass by refusing everything.

const payerKey = anvilPrivateKeys[1]
const payer = privateKeyToAccount(payerKey).address
const merchant = privateKeyToAccount(anvilPrivateKeys[2]).address
const attacker = privateKeyToAccount(anvilPrivateKeys[5]).address
const secondKey = anvilPrivateKeys[3]
const second = privateKeyToAccount(secondKey).address
const victimKey = anvilPrivateKeys[4]
const victim = privateKeyToAccount(victimKey).address

let anvil: AnvilInstance
let token: Address
let reader: PublicClient
let asset: string
let account: string

beforeAll(async () => {
  anvil = await startAnvil()
  token = await deployTestToken(anvil.rpcUrl)
  for (const holder of [payer, second, victim])
    await mintTestToken(anvil.rpcUrl, token, holder, 1_000_000_000n)
  reader = createPublicClient({
    chain: anvilChain(anvil.chainId, anvil.rpcUrl),
    transport: http(anvil.rpcUrl),
  })
  asset = `${anvil.caip2}/erc20:${token}`
  account = `${anvil.caip2}:${payer}`
  // The victim once approved the payer's address: an allowance a hostile gateway would like to spend.
  const victimWallet = createWalletClient({
    account: privateKeyToAccount(victimKey),
    chain: anvilChain(anvil.chainId, anvil.rpcUrl),
    transport: http(anvil.rpcUrl),
  })
  const hash = await victimWallet.writeContract({
    address: token,
    abi: erc20Abi,
    functionName: 'approve',
    args: [payer, 500_000_000n],
  })
  await reader.waitForTransactionReceipt({ hash, pollingInterval: 50 })
})
afterAll(() => anvil?.stop())

const calldata = {
  transfer: (to: Address, value: bigint) =>
    encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [to, value] }),
  approve: (to: Address, value: bigint) =>
    encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [to, value] }),
  transferFrom: (from: Address, to: Address, value: bigint) =>
    encodeFunctionData({ abi: erc20Abi, functionName: 'transferFrom', args: [from, to, value] }),
}

/** A payment of `value` whose one option carries `actions`, confirmed as succeeded. */
function pay(path: EvmPath, value: bigint, actions: ReturnType<typeof rpc>[], policy = {}) {
  const counted = evmSignerOn(path, payerKey, anvil, policy)
  const outcome = payAgainst(
    {
      options: () => ({ body: { options: [option('opt_1', account, asset, value, actions)] } }),
      confirm: () => ({ body: succeeded }),
    },
    [counted.signer],
    'opt_1',
  )
  return { counted, outcome }
}

async function expectRefused(
  run: { counted: { calls: () => number }; outcome: Promise<Outcome> },
  code: string,
  context: Record<string, unknown> = {},
) {
  const { error, result } = await run.outcome
  expect(result, 'the payment must not complete').toBeUndefined()
  expect(isPayError(error), String(error)).toBe(true)
  expect(error).toMatchObject({ code, context: expect.objectContaining(context) })
  expect(run.counted.calls()).toBe(0)
}

const send = (tx: Record<string, unknown>) =>
  rpc(anvil.caip2, 'eth_sendTransaction', [{ from: payer, ...tx }])
const typed = (data: unknown, method = 'eth_signTypedData_v4') =>
  rpc(anvil.caip2, method, [payer, method === 'eth_signTypedData_v4' ? JSON.stringify(data) : data])
const authorization = (value = 1_000_000n) =>
  authorizationTypedData({ token, chainId: anvil.chainId, from: payer, to: merchant, value })

describe.each(evmPaths)('hostile gateway, EVM signer via %s', (path) => {
  describe('class 1: fields the guard did not decode are never forwarded', () => {
    it('refuses `input` carrying approve(attacker, MAX), alone or next to an innocent `data`', async () => {
      const approveAll = calldata.approve(attacker, maxUint256)
      await expectRefused(pay(path, 1_000_000n, [send({ to: token, input: approveAll })]), 'action_rejected')
      await expectRefused(
        pay(path, 1_000_000n, [
          send({ to: token, data: calldata.transfer(merchant, 1n), input: approveAll }),
        ]),
        'action_rejected',
        { field: 'input' },
      )
    })

    it('refuses an EIP-7702 delegation, an access list, blob fields and unknown keys', async () => {
      const transfer = { to: token, data: calldata.transfer(merchant, 1n) }
      const delegation = {
        ...transfer,
        type: '0x4',
        authorizationList: [
          {
            chainId: toHex(anvil.chainId),
            address: attacker,
            nonce: '0x0',
            yParity: '0x0',
            r: '0x1',
            s: '0x1',
          },
        ],
      }
      await expectRefused(pay(path, 1_000_000n, [send(delegation)]), 'action_rejected', {
        field: 'authorizationList',
      })
      await expectRefused(pay(path, 1_000_000n, [send({ ...transfer, type: '0x4' })]), 'action_rejected', {
        field: 'type',
      })
      await expectRefused(pay(path, 1_000_000n, [send({ ...transfer, accessList: [] })]), 'action_rejected', {
        field: 'accessList',
      })
      await expectRefused(
        pay(path, 1_000_000n, [send({ ...transfer, blobVersionedHashes: [] })]),
        'action_rejected',
        { field: 'blobVersionedHashes' },
      )
    })

    it('refuses more than the option amount, whichever spelling carries the calldata', async () => {
      for (const key of ['data', 'input']) {
        await expectRefused(
          pay(path, 1_000_000n, [send({ to: token, [key]: calldata.transfer(merchant, 1_000_001n) })]),
          'action_rejected',
          { limit: '1000000' },
        )
      }
    })
  })

  describe('class 5 and typed data: only what decodes is signed', () => {
    it('refuses personal_sign of a 32-byte digest, of non-UTF-8 bytes and of control characters', async () => {
      const digest = `0x${'ab'.repeat(32)}`
      for (const message of [digest, '0xff00fe', toHex('pay\u0000me')]) {
        await expectRefused(
          pay(path, 1n, [rpc(anvil.caip2, 'personal_sign', [message, payer])]),
          'action_rejected',
        )
      }
    })

    it('refuses typed data without a chainId, with an EIP712Domain that hides a field, v1, or extra types', async () => {
      const data = authorization()
      const { chainId: _chainId, ...unbound } = data.domain
      const noChain = {
        ...data,
        domain: unbound,
        types: { ...data.types, EIP712Domain: data.types.EIP712Domain.filter((f) => f.name !== 'chainId') },
      }
      await expectRefused(pay(path, 1_000_000n, [typed(noChain)]), 'action_rejected', {
        chainId: anvil.chainId,
      })
      const hidden = { ...data, types: { ...data.types, EIP712Domain: data.types.EIP712Domain.slice(0, 3) } }
      await expectRefused(pay(path, 1_000_000n, [typed(hidden)]), 'action_rejected', {
        expected: expect.stringContaining('verifyingContract'),
      })
      const v1 = [{ type: 'string', name: 'contents', value: 'pay me' }]
      await expectRefused(pay(path, 1_000_000n, [typed(v1, 'eth_signTypedData')]), 'invalid_action')
      const extra = { ...data, types: { ...data.types, Mail: [{ name: 'contents', type: 'string' }] } }
      await expectRefused(pay(path, 1_000_000n, [typed(extra)]), 'action_rejected', { type: 'Mail' })
      const foreignChain = { ...data, domain: { ...data.domain, chainId: 1 } }
      await expectRefused(
        pay(path, 1_000_000n, [typed(foreignChain, 'eth_signTypedData_v3')]),
        'action_rejected',
      )
    })
  })

  describe('controls: what the option covers is signed and verifies', () => {
    it('signs an EIP-3009 authorization (v4 and v3) that verifies for the payer', async () => {
      // Anvil, the WalletConnect path's remote wallet here, implements only v4 of the two.
      const methods =
        path === 'WalletConnect' ? ['eth_signTypedData_v4'] : ['eth_signTypedData_v4', 'eth_signTypedData_v3']
      for (const method of methods) {
        const data = authorization()
        const run = pay(path, 1_000_000n, [typed(data, method)])
        const { result, gateway } = await run.outcome
        expect(result).toMatchObject({ status: 'succeeded' })
        const [signature] = (gateway.calls.confirm![0] as { results: Hex[] }).results
        const valid = await verifyTypedData({
          address: payer,
          domain: data.domain,
          types: { [data.primaryType]: data.types[data.primaryType] },
          primaryType: data.primaryType,
          message: data.message,
          signature: signature!,
        } as never)
        expect(valid).toBe(true)
        expect(run.counted.calls()).toBe(1)
      }
    })

    it('signs readable personal_sign text, and lets the host decline it', async () => {
      const text = 'caipay test payment: I pay 1 USDC.'
      const run = pay(path, 1n, [rpc(anvil.caip2, 'personal_sign', [toHex(text), payer])])
      const { result, gateway } = await run.outcome
      expect(result).toMatchObject({ status: 'succeeded' })
      const [signature] = (gateway.calls.confirm![0] as { results: Hex[] }).results
      expect(await verifyMessage({ address: payer, message: text, signature: signature! })).toBe(true)
      if (path === 'local account' || path === 'EIP-1193') {
        const shown: string[] = []
        const declined = pay(path, 1n, [rpc(anvil.caip2, 'personal_sign', [toHex(text), payer])], {
          onSignMessage: ({ text }: { text: string }) => {
            shown.push(text)
            return false
          },
        })
        const { error } = await declined.outcome
        expect(error).toMatchObject({ code: 'user_rejected' })
        expect(shown).toEqual([text])
        expect(declined.counted.calls()).toBe(0)
      }
    })

    it('class 2: sends a transfer spelled with `input`, with the wallet’s own fees and nonce, not the gateway’s', async () => {
      const before = await balance(merchant)
      const nonce = await reader.getTransactionCount({ address: payer, blockTag: 'pending' })
      const hostile = {
        to: token,
        input: calldata.transfer(merchant, 700_000n),
        gas: toHex(21_000),
        maxFeePerGas: toHex(10n ** 15n),
        maxPriorityFeePerGas: toHex(10n ** 15n),
        gasPrice: toHex(10n ** 15n),
        nonce: toHex(nonce + 5),
        type: '0x2',
      }
      const run = pay(path, 1_000_000n, [send(hostile)])
      const { result, gateway } = await run.outcome
      expect(result).toMatchObject({ status: 'succeeded' })
      const [hash] = (gateway.calls.confirm![0] as { results: Hex[] }).results
      const receipt = await reader.waitForTransactionReceipt({ hash: hash!, pollingInterval: 50 })
      expect(receipt.status).toBe('success')
      const tx = await reader.getTransaction({ hash: hash! })
      expect(tx.nonce).toBe(nonce)
      expect(tx.maxFeePerGas! < 10n ** 12n).toBe(true)
      expect(tx.maxPriorityFeePerGas! < 10n ** 12n).toBe(true)
      expect(tx.gas > 21_000n).toBe(true)
      expect(await balance(merchant)).toBe(before + 700_000n)
      expect(run.counted.calls()).toBe(1)
    })
  })
})

function balance(owner: Address) {
  return reader.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [owner] })
}

const sendFrom = (from: Address, tx: Record<string, unknown>) =>
  rpc(anvil.caip2, 'eth_sendTransaction', [{ from, ...tx }])
const typedFrom = (from: Address, data: unknown) =>
  rpc(anvil.caip2, 'eth_signTypedData_v4', [from, JSON.stringify(data)])
const authorizationOf = (from: Address, value: bigint) =>
  authorizationTypedData({ token, chainId: anvil.chainId, from, to: merchant, value })

interface Run {
  counted: { calls: () => number }
  outcome: Promise<Outcome>
}

function payWith(
  path: EvmPath,
  options: ReturnType<typeof option>[],
  optionId: string,
  { keys = [payerKey], spenders }: { keys?: Hex[]; spenders?: string[] } = {},
): Run {
  const counted = evmSignerOn(path, keys, anvil, spenders ? { spenders } : {})
  const outcome = payAgainst(
    { options: () => ({ body: { options } }), confirm: () => ({ body: succeeded }) },
    [counted.signer],
    optionId,
  )
  return { counted, outcome }
}

async function expectPaid(run: Run) {
  const { result, error } = await run.outcome
  expect(error).toBeUndefined()
  expect(result).toMatchObject({ status: 'succeeded' })
  expect(run.counted.calls()).toBe(1)
}

// Issue 27, causes 1-3 and the variants an attacker tries next: the same counting on every key the
// wallet holds, and controls proving the same setup still pays.
describe.each(evmPaths)('the guard model on the EVM signer via %s', (path) => {
  describe('cause 1: one canonical asset identity', () => {
    it('refuses options showing one token, spelled two ways, with decimals 6 and 12', async () => {
      for (const spelling of [token.toLowerCase(), token.toUpperCase().replace('0X', '0x')]) {
        const honest = option('opt_6', account, asset, 1_000_000n, [
          typedFrom(payer, authorizationOf(payer, 1_000_000n)),
        ])
        const twelve = option(
          'opt_12',
          account,
          `${anvil.caip2}/erc20:${spelling}`,
          10n ** 12n,
          [typedFrom(payer, authorizationOf(payer, 10n ** 12n))],
          12,
        )
        await expectRefused(payWith(path, [honest, twelve], 'opt_12'), 'invalid_response', {
          decimals: [6, 12],
        })
      }
    })

    it('pays an option that names its token in another spelling than the action (one asset)', async () => {
      const lower = `${anvil.caip2}/erc20:${token.toLowerCase()}`
      const opt = option('opt_1', account, lower, 1_000_000n, [
        typedFrom(payer, authorizationOf(payer, 1_000_000n)),
      ])
      await expectPaid(payWith(path, [opt], 'opt_1'))
    })
  })

  describe('cause 2: the option’s account signs, no other', () => {
    it('refuses an option for one advertised account whose action the other one would sign', async () => {
      if (path === 'local account') return // one account by construction: the next case covers it
      const forSecond = option('opt_b', `${anvil.caip2}:${second}`, asset, 1_000_000n, [
        typedFrom(payer, authorizationOf(payer, 1_000_000n)),
      ])
      await expectRefused(
        payWith(path, [forSecond], 'opt_b', { keys: [payerKey, secondKey] }),
        'action_rejected',
        {
          account: `${anvil.caip2}:${payer}`,
          optionAccount: `${anvil.caip2}:${second}`,
        },
      )
      const sendFromPayer = option('opt_b', `${anvil.caip2}:${second}`, asset, 1_000_000n, [
        sendFrom(payer, { to: token, data: calldata.transfer(merchant, 1n) }),
      ])
      await expectRefused(
        payWith(path, [sendFromPayer], 'opt_b', { keys: [payerKey, secondKey] }),
        'action_rejected',
        { optionAccount: `${anvil.caip2}:${second}` },
      )
    })

    it('refuses an option for an account the wallet never advertised, or for its account on another chain', async () => {
      const foreign = option('opt_x', `${anvil.caip2}:${attacker}`, asset, 1_000_000n, [
        typedFrom(payer, authorizationOf(payer, 1_000_000n)),
      ])
      await expectRefused(payWith(path, [foreign], 'opt_x'), 'action_rejected', {
        optionAccount: `${anvil.caip2}:${attacker}`,
      })
      const otherChain = option('opt_y', `eip155:1:${payer}`, asset, 1_000_000n, [
        typedFrom(payer, authorizationOf(payer, 1_000_000n)),
      ])
      await expectRefused(payWith(path, [otherChain], 'opt_y'), 'action_rejected', {
        optionAccount: `eip155:1:${payer}`,
      })
    })

    it('pays with the second account when the option is the second account’s', async () => {
      if (path === 'local account') return
      const forSecond = option('opt_b', `${anvil.caip2}:${second}`, asset, 1_000_000n, [
        typedFrom(second, authorizationOf(second, 1_000_000n)),
      ])
      await expectPaid(payWith(path, [forSecond], 'opt_b', { keys: [payerKey, secondKey] }))
    })
  })

  describe('cause 3: a direct payment is `transfer` from the signer', () => {
    const one = (actions: ReturnType<typeof rpc>[], value = 1_000_000n) => [
      option('opt_1', account, asset, value, actions),
    ]

    it('refuses transferFrom out of another account’s allowance, and leaves its tokens where they are', async () => {
      const before = await balance(victim)
      // To the merchant, or even to the payer itself within the amount: no payment needs transferFrom.
      for (const to of [merchant, payer]) {
        const data = calldata.transferFrom(victim, to, 1_000_000n)
        await expectRefused(
          payWith(path, one([sendFrom(payer, { to: token, data })]), 'opt_1'),
          'action_rejected',
          {
            selector: '0x23b872dd',
          },
        )
      }
      expect(await balance(victim)).toBe(before)
    })

    it('refuses calldata a token could read otherwise: trailing bytes, short, dirty address words', async () => {
      const transfer = calldata.transfer(merchant, 1_000_000n)
      const dirty = `${transfer.slice(0, 10)}${'00'.repeat(11)}01${transfer.slice(34)}`
      for (const data of [`${transfer}00`, `${transfer}${'00'.repeat(32)}`, transfer.slice(0, -2), dirty]) {
        await expectRefused(
          payWith(path, one([sendFrom(payer, { to: token, data })]), 'opt_1'),
          'action_rejected',
        )
      }
    })

    it('refuses approve and EIP-2612 permit to a spender the wallet did not allow-list', async () => {
      await expectRefused(
        payWith(path, one([sendFrom(payer, { to: token, data: calldata.approve(attacker, 1n) })]), 'opt_1'),
        'action_rejected',
        { spender: `${anvil.caip2}:${attacker}` },
      )
      const permit = {
        types: { Permit: permitFields },
        primaryType: 'Permit',
        domain: { name: 'USD Coin', version: '2', chainId: anvil.chainId, verifyingContract: token },
        message: { owner: payer, spender: attacker, value: '1', nonce: '0', deadline: '1900000000' },
      }
      await expectRefused(payWith(path, one([typedFrom(payer, permit)]), 'opt_1'), 'action_rejected', {
        primaryType: 'Permit',
      })
    })

    it('approves an allow-listed spender within the amount, never beyond it', async () => {
      const spenders = [`${anvil.caip2}:${merchant}`]
      await expectRefused(
        payWith(
          path,
          one([sendFrom(payer, { to: token, data: calldata.approve(merchant, maxUint256) })]),
          'opt_1',
          {
            spenders,
          },
        ),
        'action_rejected',
        { limit: '1000000' },
      )
      await expectPaid(
        payWith(
          path,
          one([sendFrom(payer, { to: token, data: calldata.approve(merchant, 1_000_000n) })]),
          'opt_1',
          {
            spenders,
          },
        ),
      )
    })

    it('refuses a transfer that also carries native value, and a transaction that pays nothing', async () => {
      await expectRefused(
        payWith(
          path,
          one([sendFrom(payer, { to: token, data: calldata.transfer(merchant, 1n), value: '0x1' })]),
          'opt_1',
        ),
        'action_rejected',
      )
      await expectRefused(payWith(path, one([sendFrom(payer, { to: attacker })]), 'opt_1'), 'action_rejected')
    })

    it('sends the direct payment: transfer from the signer', async () => {
      const before = await balance(merchant)
      await expectPaid(
        payWith(
          path,
          one([sendFrom(payer, { to: token, data: calldata.transfer(merchant, 1_000_000n) })]),
          'opt_1',
        ),
      )
      expect(await balance(merchant)).toBe(before + 1_000_000n)
    })
  })
})
