// caipay/adapters/solana: everything of caipay/adapters/solana-kit (no web3.js there), plus what needs
// @solana/web3.js: the signer over a Keypair and the x402 transaction builder.
export * from '../solana-kit/index.js'
export { type SolanaKeypairSignerOptions, type SolanaSignerOptions, solanaSigner } from './solanaSigner.js'
export { solanaX402Builder, type X402SolanaNode } from './x402.js'
