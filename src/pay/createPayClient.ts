import { createSignerRegistry } from '../actions/registry.js'
import { isUserRejection } from '../actions/rejection.js'
import type { Signer } from '../actions/types.js'
import { createGatewayClient } from '../client/gateway.js'
import type { GatewayApi } from '../client/gatewayApi.js'
import type { Credentials, Fetch } from '../client/http.js'
import type { RetryPolicy } from '../client/retry.js'
import type { SdkInfo } from '../client/sdk.js'
import type { PaymentOption } from '../contract/gateway.js'
import { abortable } from '../errors/abort.js'
import { PayError } from '../errors/PayError.js'
import type { CollectDataUrlOptions } from '../flow/collectData.js'
import {
  type CollectDataHandler,
  createPaymentFlow,
  type PaymentFlow,
  type PaymentFlowOptions,
  resumePaymentFlow,
} from '../flow/createPaymentFlow.js'
import { isPushOption, pushFallback } from '../flow/options.js'
import type { PollOptions } from '../flow/poll.js'
import type { FlowSnapshot } from '../flow/snapshot.js'
import type { PaymentResult } from '../flow/types.js'
import { hostOf, type PaymentLink, parsePaymentLink } from '../link/parsePaymentLink.js'

interface PayClientCommon {
  signers: readonly Signer[]
  /** Hosts a payment link may point at. Default: the host of `baseUrl`. */
  trustedHosts?: readonly string[]
  guard?: 'on' | 'off'
  /** What describes an option before it is signed: `createReviewer()` from caipay/review. */
  review?: PaymentFlowOptions['review']
  poll?: PollOptions
  persist?: PaymentFlowOptions['persist']
  reconcile?: PaymentFlowOptions['reconcile']
  /** Lets flows sign subscription mandates: `createMandates()` from caipay/subscriptions. */
  mandates?: PaymentFlowOptions['mandates']
}

interface PayClientHttp {
  baseUrl: string
  fetch?: Fetch
  retry?: Partial<RetryPolicy>
  sdk?: Partial<SdkInfo>
  /** `Pay-Version`; omit for the version pinned to the account. */
  version?: string
}

export type PayClientConfig = PayClientCommon &
  (
    | (PayClientHttp & { apiKey: string })
    | (PayClientHttp & { appId: string; clientId: string })
    /** An in-process transport (tests, a server embedding the wallet). */
    | { gateway: GatewayApi; baseUrl?: string }
  )

export interface FlowOverrides {
  signal?: AbortSignal
  onCollectData?: CollectDataHandler
  collectDataUrl?: CollectDataUrlOptions
  /** Shown what is about to be signed (needs `review`); false refuses it as a user rejection. */
  onReview?: PaymentFlowOptions['onReview']
}

export interface PayOptions extends FlowOverrides {
  /** Picks the option to pay with; default: the first. Reject with `user_rejected` to cancel. */
  selectOption?: (options: readonly PaymentOption[]) => string | Promise<string>
  /** Sees the flow before it starts, e.g. to listen to its events. */
  onFlow?: (flow: PaymentFlow) => void
}

export interface PayClient {
  readonly gateway: GatewayApi
  parseLink(link: string): PaymentLink
  createFlow(link: string, overrides?: FlowOverrides): PaymentFlow
  resumeFlow(snapshot: FlowSnapshot | unknown, overrides?: FlowOverrides): PaymentFlow
  /** Loads options, selects, completes the form when asked, signs, confirms and polls until final. */
  pay(link: string, options?: PayOptions): Promise<PaymentResult>
}

export function createPayClient(config: PayClientConfig): PayClient {
  const gateway = 'gateway' in config ? config.gateway : createGatewayClient(httpConfig(config))
  const trustedHosts = config.trustedHosts ?? (config.baseUrl ? [hostOf(config.baseUrl)] : [])
  const base = {
    gateway,
    signers: config.signers,
    ...(config.guard && { guard: config.guard }),
    ...(config.review && { review: config.review }),
    ...(config.poll && { poll: config.poll }),
    ...(config.persist && { persist: config.persist }),
    ...(config.reconcile && { reconcile: config.reconcile }),
    ...(config.mandates && { mandates: config.mandates }),
  }
  // Fails on bad signers (e.g. two for one namespace) now rather than at the first payment.
  createSignerRegistry(config.signers)

  const parseLink = (link: string) => parsePaymentLink(link, { trustedHosts })
  const createFlow = (link: string, overrides: FlowOverrides = {}) =>
    createPaymentFlow({ ...base, ...overrides, paymentId: parseLink(link).paymentId })

  return {
    gateway,
    parseLink,
    createFlow,
    resumeFlow: (snapshot, overrides = {}) => resumePaymentFlow(snapshot, { ...base, ...overrides }),
    async pay(link, options = {}) {
      const { selectOption, onFlow, ...overrides } = options
      const flow = createFlow(link, overrides)
      onFlow?.(flow)
      const loaded = await flow.loadOptions()
      if (loaded.result) return loaded.result

      let optionId: string | undefined
      try {
        // By default the first option a signer pays; a push option is the buyer's to send, never signed.
        const choice = selectOption
          ? selectOption(loaded.options)
          : loaded.options.find((o) => !isPushOption(o))?.id
        optionId = overrides.signal ? await abortable(choice, overrides.signal) : await choice
      } catch (error) {
        if (isUserRejection(error)) return flow.cancel()
        throw error
      }
      if (optionId === undefined) {
        throw new PayError({
          code: 'no_options',
          message: 'The payment offers no option for the accounts of this wallet.',
          // What the wallet can show instead: transfers any wallet can send (links, QR codes).
          context: {
            paymentId: flow.paymentId,
            accounts: flow.accounts,
            pushUrls: pushFallback(loaded.options).map((o) => o.push?.url),
          },
        })
      }
      flow.select(optionId)
      return flow.execute()
    },
  }
}

function httpConfig(config: PayClientHttp & ({ apiKey: string } | { appId: string; clientId: string })) {
  const auth: Credentials =
    'apiKey' in config ? { apiKey: config.apiKey } : { appId: config.appId, clientId: config.clientId }
  return {
    baseUrl: config.baseUrl,
    auth,
    ...(config.fetch && { fetch: config.fetch }),
    ...(config.retry && { retry: config.retry }),
    ...(config.sdk && { sdk: config.sdk }),
    ...(config.version && { version: config.version }),
  }
}
