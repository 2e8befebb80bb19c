/**
 * The EIP-712 differential generator: mutants of the typed data a gateway sends for EIP-3009
 * (TransferWithAuthorization, ReceiveWithAuthorization) and EIP-2612 Permit, judged by the EVM
 * decoder and the core guard. Every accepted mutant is signed as the wallet signs it (the struct
 * rebuilt from the decoded fields) with a real key, and the signature is executed on Anvil against
 * the test token with both the rebuilt and the gateway's own field values.
 * Property: whatever executes moves at most the option's amount of the option's asset out of the
 * option's account, moves nobody else's tokens, and leaves no allowance beyond the option. And the
 * review of an accepted mutant (issue 43) shows the signed struct's token, amount, payer, payee and
 * deadline, and the amount an executed authorization moved.
 */
import {
  type Address,
  createPublicClient,
  createWalletClient,
  erc20Abi,
  getAddress,
  type Hex,
  http,
  isAddress,
  type PublicClient,
} from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { testUsdcAbi } from '../../fixtures/token/index.js'
import {
  authorizationFields,
  decodeEvmAction,
  decodeEvmRequest,
  permitFields,
  type TypedDataPayload,
} from '../../protocol/evm/index.js'
import { guardActions } from '../../src/actions/guard.js'
import { createSignerRegistry } from '../../src/actions/registry.js'
import { routeActions } from '../../src/actions/route.js'
import { createReviewer, type PaymentReview } from '../../src/review/index.js'
import { anvilChain, anvilPrivateKeys, deployTestToken, mintTestToken } from '../anvil.js'
import { type Random, seededRandom } from './random.js'

const amount = 1_000_000n
const [wallet, merchant, relayer, victim, attacker] = [1, 2, 3, 4, 5].map((i) =>
  privateKeyToAccount(anvilPrivateKeys[i]!),
)
const keyOf = new Map(
  [merchant, relayer, attacker].map((a, i) => [a!.address, anvilPrivateKeys[[2, 3, 5][i]!]!]),
)

export interface TypedVerdict {
  index: number
  primaryType: string
  mutations: string[]
  accepted: boolean
  executed: string[]
  harm: string[]
}

export interface TypedCampaign {
  seed: number
  verdicts: TypedVerdict[]
  violations: TypedVerdict[]
}

type Json = Record<string, unknown>
interface Mutable {
  types: Record<string, { name: string; type: string }[]>
  primaryType: string
  domain: Json
  message: Json
}

const domainType = [
  { name: 'name', type: 'string' },
  { name: 'version', type: 'string' },
  { name: 'chainId', type: 'uint256' },
  { name: 'verifyingContract', type: 'address' },
]
const kinds = ['TransferWithAuthorization', 'ReceiveWithAuthorization', 'Permit'] as const

const hex32 = (random: Random) =>
  `0x${Array.from({ length: 32 }, () => random.int(256).toString(16).padStart(2, '0')).join('')}` as Hex
const pick = <T>(random: Random, items: readonly T[]): T => items[random.int(items.length)]!
const ownerField = (t: Mutable) => (t.primaryType === 'Permit' ? 'owner' : 'from')
const payeeField = (t: Mutable) => (t.primaryType === 'Permit' ? 'spender' : 'to')
const untilField = (t: Mutable) => (t.primaryType === 'Permit' ? 'deadline' : 'validBefore')
const primaryFields = (t: Mutable) => t.types[t.primaryType] ?? []

/** Each mutation a hostile gateway would try on one part of the typed data; returns its label. */
function mutations(chainId: number, otherToken: Address): ((t: Mutable, r: Random) => string)[] {
  return [
    // Domain.
    (t, r) => {
      const form = pick(r, [
        `0x${chainId.toString(16)}`,
        String(chainId),
        chainId + 1,
        1,
        `0x0${chainId.toString(16)}`,
      ])
      t.domain.chainId = form
      return `domain.chainId ${JSON.stringify(form)}`
    },
    (t, r) => {
      const c = String(t.domain.verifyingContract)
      t.domain.verifyingContract = pick(r, [c.toLowerCase(), `0x${c.slice(2).toUpperCase()}`, otherToken])
      return `domain.verifyingContract ${t.domain.verifyingContract}`
    },
    (t) => {
      t.domain.extra = 'x'
      return 'domain extra field'
    },
    (t, r) => {
      t.domain.salt = hex32(r)
      if (r.int(2))
        t.types.EIP712Domain = [...(t.types.EIP712Domain ?? []), { name: 'salt', type: 'bytes32' }]
      return 'domain.salt'
    },
    (t, r) => {
      const field = pick(r, ['name', 'version'])
      delete t.domain[field]
      if (r.int(2) && t.types.EIP712Domain)
        t.types.EIP712Domain = t.types.EIP712Domain.filter((f) => f.name !== field)
      return `domain.${field} missing`
    },
    (t, r) => {
      const choice = r.int(3)
      if (choice === 0) delete t.types.EIP712Domain
      else if (choice === 1) t.types.EIP712Domain = [...(t.types.EIP712Domain ?? [])].reverse()
      else
        t.types.EIP712Domain = (t.types.EIP712Domain ?? []).map((f) =>
          f.name === 'chainId' ? { ...f, type: 'uint64' } : f,
        )
      return `EIP712Domain variant ${choice}`
    },
    // Types.
    (t) => {
      t.types[t.primaryType] = [...primaryFields(t), { name: 'extra', type: 'uint256' }]
      t.message.extra = '1'
      return 'extra struct field'
    },
    (t) => {
      t.types[t.primaryType] = [...primaryFields(t)].reverse()
      return 'struct fields reordered'
    },
    (t, r) => {
      const fields = primaryFields(t)
      t.types[t.primaryType] = [...fields, fields[r.int(fields.length)]!]
      return 'struct field duplicated'
    },
    (t, r) => {
      const renamed = pick(r, kinds.filter((k) => k !== t.primaryType).concat(['Transfer'] as never))
      t.types[renamed] = primaryFields(t)
      if (r.int(2)) delete t.types[t.primaryType]
      t.primaryType = renamed
      return `primaryType ${renamed}`
    },
    (t, r) => {
      // A nested type whose name collides: the primary struct refers to it.
      const nested = pick(r, ['Permit', 'TransferWithAuthorization', 'EIP712Domain', 'Amount'])
      if (nested !== t.primaryType) t.types[nested] = [{ name: 'value', type: 'uint256' }]
      t.types[t.primaryType] = primaryFields(t).map((f) =>
        f.name === 'value' ? { name: 'value', type: nested } : f,
      )
      return `nested type ${nested}`
    },
    // Message.
    (t, r) => {
      const form = pick(r, [
        `0x${amount.toString(16)}`,
        Number(amount),
        (amount + 1n).toString(),
        (amount * 10n ** 6n).toString(),
        `${amount}.0`,
        ` ${amount}`,
        '-1',
        (2n ** 256n - 1n).toString(),
        (2n ** 256n + amount).toString(),
        '1e6',
      ])
      t.message.value = form
      return `value ${JSON.stringify(form)}`
    },
    (t, r) => {
      const field = pick(r, [ownerField(t), payeeField(t)])
      const who = pick(r, [victim!.address, attacker!.address, merchant!.address.toLowerCase()])
      t.message[field] = who
      return `${field} ${who}`
    },
    (t, r) => {
      const form = pick(r, [
        '0',
        '1',
        (2n ** 256n - 1n).toString(),
        '0xffffffffffffffff',
        String(Number.MAX_SAFE_INTEGER + 2),
      ])
      t.message[untilField(t)] = form
      return `${untilField(t)} ${form}`
    },
    (t, r) => {
      const n = String(t.message.nonce)
      const form =
        t.primaryType === 'Permit'
          ? pick(r, ['1', '0x0', '00', 0, `0x${'f'.repeat(64)}`])
          : pick(r, [n.toUpperCase().replace('0X', '0x'), n.slice(0, 40), `0x${'0'.repeat(64)}`, '0'])
      t.message.nonce = form
      return `nonce ${JSON.stringify(form)}`
    },
    (t) => {
      t.message.validAfter = t.primaryType === 'Permit' ? '0' : (2n ** 255n).toString()
      return 'validAfter'
    },
  ]
}

const reviewer = createReviewer()

/** Where the review of an accepted mutant differs from the struct the wallet signs; empty when it shows it. */
function reviewMismatch(review: PaymentReview, signed: TypedDataPayload): string[] {
  const message = signed.message as Record<string, string>
  const permit = signed.primaryType === 'Permit'
  const until = BigInt(permit ? message.deadline! : message.validBefore!)
  const after = permit ? 0n : BigInt(message.validAfter!)
  const [action, ...more] = review.actions
  const [move, ...moreMoves] = action?.moves ?? []
  const expected = {
    intent: permit ? 'permit' : 'authorize',
    from: `eip155:${signed.domain.chainId}:${permit ? message.owner : message.from}`,
    asset: `eip155:${signed.domain.chainId}/erc20:${signed.domain.verifyingContract}`,
    amount: BigInt(message.value!),
    party: `eip155:${signed.domain.chainId}:${permit ? message.spender : message.to}`,
    validUntil: until <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(until) : undefined,
    validFrom:
      after === 0n
        ? undefined
        : after <= BigInt(Number.MAX_SAFE_INTEGER)
          ? Number(after)
          : Number.MAX_SAFE_INTEGER,
  }
  const shown = {
    intent: action?.intent,
    from: action?.from,
    asset: move?.asset.id,
    amount: move?.amount,
    party: permit ? move?.spender : move?.to,
    validUntil: action?.validUntil,
    validFrom: action?.validFrom,
  }
  const differs = Object.keys(expected).filter(
    (key) => shown[key as keyof typeof shown] !== expected[key as keyof typeof expected],
  )
  if (more.length > 0 || moreMoves.length > 0) differs.push('extra actions or moves')
  if (review.total?.amount !== expected.amount) differs.push('total')
  return differs.map((key) => `review shows another ${key} than signed`)
}

export async function runTypedCampaign(
  rpcUrl: string,
  chainId: number,
  seed: number,
  count: number,
): Promise<TypedCampaign> {
  const chain = anvilChain(chainId, rpcUrl)
  const reader: PublicClient = createPublicClient({ chain, transport: http(rpcUrl) })
  const token = await deployTestToken(rpcUrl)
  const otherToken = await deployTestToken(rpcUrl)
  for (const t of [token, otherToken])
    for (const holder of [wallet, victim]) await mintTestToken(rpcUrl, t, holder!.address, 10n ** 15n)
  const caip2 = `eip155:${chainId}`
  const account = `${caip2}:${wallet!.address}`
  // Permits to the merchant are allow-listed, as a deployment allows its Permit2 or router.
  const policy = { spenders: [`${caip2}:${merchant!.address}`] }
  const registry = createSignerRegistry([
    {
      namespace: 'eip155',
      accounts: () => [account],
      methods: ['eth_signTypedData_v4'],
      request: () => Promise.reject(new Error('the generator signs mutants itself')),
      inspect: (request) => decodeEvmAction(request, policy),
    },
  ])
  const all = [wallet, merchant, relayer, victim, attacker].map((a) => a!.address)
  const balances = (t: Address) =>
    Promise.all(
      all.map((owner) =>
        reader.readContract({ address: t, abi: erc20Abi, functionName: 'balanceOf', args: [owner] }),
      ),
    )
  const allowances = (t: Address, owner: Address) =>
    Promise.all(
      all.map((spender) =>
        reader.readContract({ address: t, abi: erc20Abi, functionName: 'allowance', args: [owner, spender] }),
      ),
    )
  const pool = mutations(chainId, otherToken)
  const now = BigInt(Math.floor(Date.now() / 1000))

  const verdicts: TypedVerdict[] = []
  for (let index = 0; index < count; index++) {
    const random = seededRandom(seed * 1_000_003 + index)
    const kind = kinds[random.int(kinds.length)]!
    const permit = kind === 'Permit'
    const nonce = permit
      ? (
          await reader.readContract({
            address: token,
            abi: testUsdcAbi,
            functionName: 'nonces',
            args: [wallet!.address],
          })
        ).toString()
      : hex32(random)
    const typed: Mutable = {
      types: { EIP712Domain: [...domainType], [kind]: permit ? [...permitFields] : [...authorizationFields] },
      primaryType: kind,
      domain: { name: 'USD Coin', version: '2', chainId, verifyingContract: token },
      message: permit
        ? {
            owner: wallet!.address,
            spender: merchant!.address,
            value: amount.toString(),
            nonce,
            deadline: String(now + 3600n),
          }
        : {
            from: wallet!.address,
            to: merchant!.address,
            value: amount.toString(),
            validAfter: '0',
            validBefore: String(now + 3600n),
            nonce,
          },
    }
    const labels: string[] = []
    for (let n = 1 + random.int(3); n > 0; n--) labels.push(pool[random.int(pool.length)]!(typed, random))
    const verdict: TypedVerdict = {
      index,
      primaryType: typed.primaryType,
      mutations: labels,
      accepted: false,
      executed: [],
      harm: [],
    }
    verdicts.push(verdict)
    const request = {
      chainId: caip2,
      method: 'eth_signTypedData_v4',
      params: JSON.stringify([wallet!.address, JSON.stringify(typed)]),
    }
    let signable: TypedDataPayload
    let review: PaymentReview | undefined
    try {
      const approved = await guardActions(
        routeActions(registry, [{ type: 'walletRpc' as const, walletRpc: request }]),
        {
          accounts: [account],
          account,
          amount: {
            unit: `caip19/${caip2}/erc20:${token}`,
            value: amount.toString(),
            display: { assetName: 'USD Coin', assetSymbol: 'USDC', decimals: 6 },
          },
        },
      )
      const decoded = decodeEvmRequest({ ...request, params: JSON.parse(request.params) }, policy).signable
      if (decoded.kind !== 'typedData') throw new Error(`typed data decoded as ${decoded.kind}`)
      signable = decoded.typedData
      verdict.accepted = true
      review = await reviewer(approved, { optionId: `mutant ${index}` })
      verdict.harm.push(...reviewMismatch(review, signable))
    } catch (error) {
      if (verdict.accepted) throw error
      // What a wallet without the guard would sign: the gateway's typed data as sent. Its harm on
      // Anvil shows the generator finds what the guard refuses.
      signable = typed as unknown as TypedDataPayload
    }
    // Signed as the wallet signs: the rebuilt struct, uints as integers.
    const { EIP712Domain: _, ...types } = signable.types as Record<string, { name: string; type: string }[]>
    const fields = types[signable.primaryType]
    if (!Array.isArray(fields)) continue
    const asArgs = (message: Json) => {
      const out: Json = {}
      for (const f of fields) {
        const v = message[f.name]
        if (f.type === 'address') {
          if (typeof v !== 'string' || !isAddress(v, { strict: false })) return undefined
          out[f.name] = getAddress(v)
        } else if (f.type === 'bytes32') {
          if (typeof v !== 'string' || !/^0x[0-9a-fA-F]{64}$/.test(v)) return undefined
          out[f.name] = v
        } else {
          try {
            const b = BigInt(v as string)
            if (b < 0n || b >= 2n ** 256n) return undefined
            out[f.name] = b
          } catch {
            return undefined
          }
        }
      }
      return out
    }
    const signed = asArgs(signable.message as Json)
    if (!signed || !fields.every((f) => ['address', 'bytes32', 'uint256'].includes(f.type))) continue
    let signature: Hex
    try {
      signature = await wallet!.signTypedData({
        domain: signable.domain,
        types,
        primaryType: signable.primaryType,
        message: signed,
      } as Parameters<NonNullable<typeof wallet>['signTypedData']>[0])
    } catch {
      continue
    }
    const verifying = String(signable.domain.verifyingContract)
    if (!isAddress(verifying, { strict: false })) continue
    const contract = getAddress(verifying)
    const before = {
      balances: await balances(contract),
      allowances: await allowances(contract, wallet!.address),
    }
    // The gateway holds the signature and may submit it with the fields it sent or those signed.
    for (const [label, args] of [
      ['rebuilt', signed],
      ['gateway', asArgs(typed.message)],
    ] as const) {
      if (!args) continue
      const a = args as Record<string, never>
      const caller =
        signable.primaryType === 'ReceiveWithAuthorization' ? keyOf.get(a.to) : anvilPrivateKeys[3]
      if (!caller || !kinds.includes(signable.primaryType as never)) continue
      const client = createWalletClient({
        account: privateKeyToAccount(caller),
        chain,
        transport: http(rpcUrl),
      })
      try {
        const hash = await client.writeContract({
          address: contract,
          abi: testUsdcAbi,
          ...(signable.primaryType === 'Permit'
            ? { functionName: 'permit', args: [a.owner, a.spender, a.value, a.deadline, signature] }
            : {
                functionName:
                  signable.primaryType === 'ReceiveWithAuthorization'
                    ? 'receiveWithAuthorization'
                    : 'transferWithAuthorization',
                args: [a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce, signature],
              }),
          chain,
          gas: 300_000n,
        } as never)
        const receipt = await reader.waitForTransactionReceipt({ hash, pollingInterval: 20 })
        if (receipt.status === 'success') verdict.executed.push(label)
      } catch {}
    }
    const after = {
      balances: await balances(contract),
      allowances: await allowances(contract, wallet!.address),
    }
    const out = before.balances[0]! - after.balances[0]!
    const shown = review?.actions[0]?.moves[0]?.amount
    if (
      shown !== undefined &&
      signable.primaryType !== 'Permit' &&
      verdict.executed.length > 0 &&
      out !== shown
    )
      verdict.harm.push(`review shows ${shown}, the chain moved ${out}`)
    if (contract !== token && out !== 0n) verdict.harm.push(`another asset moved ${out}`)
    if (out > amount) verdict.harm.push(`wallet tokens out ${out}`)
    if (after.balances[3]! < before.balances[3]!) verdict.harm.push('another account’s tokens moved')
    after.allowances.forEach((granted, i) => {
      const spender = all[i]!
      if (
        granted > before.allowances[i]! &&
        (granted > amount || spender !== merchant!.address || contract !== token)
      )
        verdict.harm.push(`allowance ${granted} to ${spender}`)
    })
    // The next permit starts from a clean allowance, so one accepted permit cannot hide another. An
    // allowance the merchant can draw is drawn (what the permit let it take); a larger one, already
    // counted as harm above, is withdrawn by the wallet.
    const granted = after.allowances[1]!
    if (granted > 0n) {
      const drawable = granted <= after.balances[0]!
      const client = createWalletClient({
        account: drawable ? merchant! : wallet!,
        chain,
        transport: http(rpcUrl),
      })
      const hash = drawable
        ? await client.writeContract({
            address: contract,
            abi: erc20Abi,
            functionName: 'transferFrom',
            args: [wallet!.address, merchant!.address, granted],
            chain,
          })
        : await client.writeContract({
            address: contract,
            abi: erc20Abi,
            functionName: 'approve',
            args: [merchant!.address, 0n],
            chain,
          })
      await reader.waitForTransactionReceipt({ hash, pollingInterval: 20 })
      const drawn = after.balances[0]! - (await balances(contract))[0]!
      if (drawn + out > amount) verdict.harm.push(`permit drew ${drawn} after ${out}`)
    }
  }
  return { seed, verdicts, violations: verdicts.filter((v) => v.accepted && v.harm.length > 0) }
}
