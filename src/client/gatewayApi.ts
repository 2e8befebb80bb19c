import type {
  CancelResponse,
  ConfirmBody,
  ConfirmResponse,
  FetchBody,
  FetchResponse,
  GatewayPayment,
  OptionsBody,
  OptionsResponse,
} from '../contract/index.js'
import type { StatusResponse } from '../contract/status.js'

export interface CallOptions {
  signal?: AbortSignal
  /** Sent as `Idempotency-Key`; also makes a POST safe to retry. */
  idempotencyKey?: string
}

export interface StatusCallOptions extends CallOptions {
  /**
   * Sent as `Prefer: wait=<seconds>` (RFC 7240; whole seconds): a service that offers it holds the answer until the
   * payment's status changes (then `pollInMs` is 0); one that does not answers at once, as without it.
   */
  waitSeconds?: number | undefined
}

/**
 * The wallet gateway (spec rows 18-23) as the flow sees it. `createGatewayClient` implements it over HTTP;
 * tests and in-process transports may implement it directly.
 */
export interface GatewayApi {
  getPayment(paymentId: string, options?: CallOptions): Promise<GatewayPayment>
  getStatus(paymentId: string, options?: StatusCallOptions): Promise<StatusResponse>
  getOptions(paymentId: string, body: OptionsBody, options?: CallOptions): Promise<OptionsResponse>
  fetchActions(paymentId: string, body: FetchBody, options?: CallOptions): Promise<FetchResponse>
  confirm(paymentId: string, body: ConfirmBody, options?: CallOptions): Promise<ConfirmResponse>
  cancel(paymentId: string, options?: CallOptions): Promise<CancelResponse>
}
