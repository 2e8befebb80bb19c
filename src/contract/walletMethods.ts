/**
 * Wallet RPC methods whose signer call itself puts money on its way (the wallet broadcasts). The
 * wallet flow never repeats one blindly after a crash, and the service treats a confirm of one as
 * funds already moving. The one list both sides read.
 */
export const broadcastingMethods: readonly string[] = ['eth_sendTransaction', 'solana_signAndSendTransaction']

export function isBroadcastingMethod(method: string): boolean {
  return broadcastingMethods.includes(method)
}
