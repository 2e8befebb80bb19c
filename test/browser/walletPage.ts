/**
 * A browser wallet, bundled by esbuild into the test page (test/browser/wallet.test.ts): the caipay
 * library with each kind of signer a wallet brings (its EVM adapter over an in-page EIP-1193 provider that
 * signs with a real viem local account and forwards reads to a JSON-RPC node, or over the viem account
 * itself; its Solana adapter over a web3.js Keypair, or its kit entry over a @solana/kit key pair
 * signer), and the hosted form in an iframe. Not a test file itself.
 */
import { generateKeyPairSigner } from '@solana/kit'
import { Keypair } from '@solana/web3.js'
import { type Hex, toHex } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { evmSigner } from '../../adapters/evm/index.js'
import { solanaSigner } from '../../adapters/solana/index.js'
import { solanaSigner as solanaKitSigner } from '../../adapters/solana-kit/index.js'
import type { Signer } from '../../src/actions/types.js'
import { createPayClient, type PaymentOption } from '../../src/index.js'

/** The signer kinds a wallet brings: EIP-1193 provider (default), viem account, web3.js Keypair, kit signer. */
export type SignerKind = 'evm-provider' | 'evm-account' | 'solana-keypair' | 'solana-kit'

export interface PayInput {
  baseUrl: string
  apiKey: string
  link: string
  privateKey: Hex
  /** CAIP-2 chains the wallet holds its account on. */
  chains: string[]
  /** Where reads go (Anvil); test mode needs none. */
  rpcUrl?: string
  /** Only options whose first action uses this method (e.g. `eth_signTypedData_v4`). */
  method?: string
  signer?: SignerKind
}

export interface PayOutput {
  status: string
  txId: string | undefined
  ms: number
  states: string[]
  formShown: boolean
  /** The CAIP-10 account that paid. */
  account: string | undefined
}

type Eip1193Request = { method: string; params?: readonly unknown[] | object }

/** EIP-1193 in the page: keys stay here, reads go to the node. */
function localProvider(privateKey: Hex, firstChainId: number, rpcUrl: string | undefined) {
  const account = privateKeyToAccount(privateKey)
  let chainId = firstChainId
  let rpcId = 0
  return {
    address: account.address,
    async request({ method, params }: Eip1193Request): Promise<unknown> {
      const args = (params ?? []) as unknown[]
      switch (method) {
        case 'eth_chainId':
          return toHex(chainId)
        case 'eth_accounts':
        case 'eth_requestAccounts':
          return [account.address]
        case 'wallet_switchEthereumChain':
          chainId = Number((args[0] as { chainId: string }).chainId)
          return null
        case 'personal_sign':
          return account.signMessage({ message: { raw: args[0] as Hex } })
        case 'eth_signTypedData_v4': {
          const typed = JSON.parse(args[1] as string)
          const { EIP712Domain: _, ...types } = typed.types as Record<
            string,
            { name: string; type: string }[]
          >
          const message = { ...typed.message }
          for (const field of types[typed.primaryType] ?? [])
            if (/^u?int\d*$/.test(field.type)) message[field.name] = BigInt(message[field.name])
          return account.signTypedData({
            domain: typed.domain,
            types,
            primaryType: typed.primaryType,
            message,
          })
        }
        default: {
          if (!rpcUrl) throw Object.assign(new Error(`${method} is not supported`), { code: 4200 })
          const response = await fetch(rpcUrl, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ jsonrpc: '2.0', id: ++rpcId, method, params: args }),
          })
          const body = await response.json()
          if (body.error) throw Object.assign(new Error(body.error.message), { code: body.error.code })
          return body.result
        }
      }
    },
  }
}

/** Shows the hosted form in an iframe and resolves with the message it posts (IC_COMPLETE or IC_ERROR). */
function openForm(url: string): Promise<unknown> {
  return new Promise((resolve) => {
    const frame = document.createElement('iframe')
    frame.id = 'collect'
    frame.src = url
    frame.style.cssText = 'width:420px;height:720px;border:0'
    const formOrigin = new URL(url).origin
    const onMessage = (event: MessageEvent) => {
      if (event.origin !== formOrigin || event.source !== frame.contentWindow) return
      window.removeEventListener('message', onMessage)
      frame.remove()
      resolve(event.data)
    }
    window.addEventListener('message', onMessage)
    document.body.append(frame)
  })
}

async function signerFor(input: PayInput): Promise<Signer> {
  switch (input.signer ?? 'evm-provider') {
    case 'evm-account':
      return evmSigner({
        account: privateKeyToAccount(input.privateKey),
        chains: Object.fromEntries(
          input.chains.map((chain) => [chain, { rpcUrl: input.rpcUrl ?? 'http://127.0.0.1:9' }]),
        ),
        pollingInterval: 50,
      })
    case 'solana-keypair':
      return solanaSigner({ keypair: Keypair.generate(), chains: input.chains })
    case 'solana-kit':
      return solanaKitSigner({ kitSigner: await generateKeyPairSigner(), chains: input.chains })
    default: {
      const firstChain = Number(input.chains[0]!.split(':')[1])
      const provider = localProvider(input.privateKey, firstChain, input.rpcUrl)
      return evmSigner({
        provider,
        accounts: input.chains.map((chain) => `${chain}:${provider.address}`),
        pollingInterval: 50,
      })
    }
  }
}

async function pay(input: PayInput): Promise<PayOutput> {
  const started = performance.now()
  const signer = await signerFor(input)
  const solana = input.signer?.startsWith('solana') ?? false
  const client = createPayClient({ baseUrl: input.baseUrl, apiKey: input.apiKey, signers: [signer] })
  const states: string[] = []
  let formShown = false
  const result = await client.pay(input.link, {
    onFlow: (flow) => flow.on('state', (event) => states.push(event.to)),
    selectOption: (options: readonly PaymentOption[]) => {
      const option = options.find((o) =>
        solana
          ? o.account?.startsWith('solana:') && o.actions.length === 1
          : input.method === undefined ||
            (o.actions[0]?.type === 'walletRpc' && o.actions[0].walletRpc.method === input.method),
      )
      if (!option) throw new Error(`no option among ${options.length} fits`)
      return option.id
    },
    onCollectData: ({ url }) => {
      formShown = true
      return openForm(url)
    },
  })
  return {
    status: result.status,
    txId: result.txId,
    ms: performance.now() - started,
    states,
    formShown,
    account: signer.accounts()[0],
  }
}

Object.assign(window, { caipayWallet: { pay } })
