/**
 * The parts of `@walletconnect/sign-client` the adapter uses, written structurally so the adapter
 * (and its declaration files) do not depend on WalletConnect's type packages: a `SignClient`
 * instance and a `SessionTypes.Struct` fit these shapes as they are.
 */

/** One entry of a session's `namespaces`, keyed by namespace (`eip155`) or by chain (`eip155:1`). */
export interface WalletConnectNamespace {
  chains?: readonly string[]
  /** CAIP-10 accounts the wallet approved. */
  accounts: readonly string[]
  methods: readonly string[]
  events?: readonly string[]
}

/** The fields of a settled WalletConnect session the adapter reads. */
export interface WalletConnectSession {
  topic: string
  /** Unix seconds after which the session is void. */
  expiry: number
  namespaces: Readonly<Record<string, WalletConnectNamespace>>
}

export interface WalletConnectRequestParams {
  topic: string
  chainId: string
  request: { method: string; params: unknown }
  /** Seconds; sign-client accepts 300 to 604800. */
  expiry?: number
}

/** What the adapter needs from a `SignClient`. */
export interface WalletConnectClient {
  session: { get(topic: string): WalletConnectSession }
  request<T = unknown>(params: WalletConnectRequestParams): Promise<T>
}
