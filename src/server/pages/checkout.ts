/**
 * The checkout page at `gatewayUrl`: what is being paid, to whom, a QR code of the payment link for a
 * phone wallet, and the live status (polled from the page's own status route, since a browser holds no
 * gateway credentials). Once the payment is final the QR code and the link give way to the outcome: a
 * paid link must not invite a second scan.
 */
import type { PaymentStatus } from '../../contract/common.js'
import { escapeHtml, type Page, renderPage, scriptJson } from './html.js'
import { qrSvg } from './qr.js'

export interface CheckoutPageInput {
  paymentId: string
  merchantName: string
  merchantIconUrl: string | null
  /** e.g. "12.50 USD" */
  amountText: string
  status: PaymentStatus
  isFinal: boolean
  txId: string | null
  /** The payment link a wallet opens (the page's own URL). */
  link: string
  statusUrl: string
  /** Unix seconds. */
  expiresAt: number
  testMode: boolean
  /** Preview API: where to send the buyer once the payment is final. */
  checkout: { successUrl: string; errorUrl: string } | null
  /**
   * The push options' links (docs/push-payments.md), each shown as its own QR code for a wallet that can
   * only send: any link a wallet's camera opens (a Solana Pay request, an EIP-681 transfer).
   */
  pushLinks?: readonly PushLink[]
}

export interface PushLink {
  /** What the buyer reads above the code, e.g. "USDC on Solana: Solana Pay". */
  label: string
  url: string
}

/** What the buyer reads once the payment is final, instead of the QR code. */
const finalTexts: Record<PaymentStatus, string> = {
  requires_action: '',
  processing: '',
  succeeded: 'Payment received. You can close this page.',
  failed: 'The payment failed.',
  expired: 'This payment link has expired.',
  cancelled: 'This payment was cancelled.',
}

const statusLabels: Record<PaymentStatus, string> = {
  requires_action: 'Waiting for payment',
  processing: 'Processing',
  succeeded: 'Paid',
  failed: 'Failed',
  expired: 'Expired',
  cancelled: 'Cancelled',
}

export function renderCheckoutPage(input: CheckoutPageInput): Page {
  const icon = input.merchantIconUrl
    ? `<img class="logo" src="${escapeHtml(input.merchantIconUrl)}" alt="" width="40" height="40">`
    : `<div class="logo initial" aria-hidden="true">${escapeHtml(input.merchantName.slice(0, 1).toUpperCase())}</div>`
  const body = `<main>
<div class="card">
<div class="merchant">${icon}<div><div class="muted">Pay</div><h1 id="merchant">${escapeHtml(input.merchantName)}</h1></div></div>
${input.testMode ? '<p class="test">Test mode: no funds move.</p>' : ''}
<p class="amount" id="amount">${escapeHtml(input.amountText)}</p>
<p class="status" id="status" data-status="${input.status}" role="status" aria-live="polite">${escapeHtml(statusLabels[input.status])}</p>
<p class="muted" id="tx"${input.txId ? '' : ' hidden'}>Transaction: <code id="txid">${escapeHtml(input.txId ?? '')}</code></p>
${input.isFinal ? '' : pendingSection(input.link, input.pushLinks ?? [])}
<div class="done" id="done" data-status="${input.status}"${input.isFinal ? '' : ' hidden'}>
<p id="done-text">${escapeHtml(finalTexts[input.status])}</p>
</div>
<a class="return" id="return" hidden></a>
</div>
<p class="muted center small">Payment ${escapeHtml(input.paymentId)}</p>
</main>`
  const config = scriptJson({
    statusUrl: input.statusUrl,
    link: input.link,
    status: input.status,
    isFinal: input.isFinal,
    expiresAt: input.expiresAt,
    labels: statusLabels,
    finalTexts,
    checkout: input.checkout,
  })
  return renderPage({
    title: `Pay ${input.merchantName}`,
    body,
    style,
    script: script(config),
    frameAncestors: "'self'",
  })
}

function pendingSection(link: string, pushLinks: readonly PushLink[]): string {
  return `<div id="pending">
<div class="qr" id="qr" aria-label="QR code of the payment link">${qrSvg(link)}</div>
<p class="muted center">Scan with a compatible wallet, or open this link in it:</p>
<p class="link"><code id="link">${escapeHtml(link)}</code></p>
<button type="button" id="copy">Copy payment link</button>
${pushLinks.length > 0 ? pushSection(pushLinks) : ''}
<p class="muted center" id="expires"></p>
</div>`
}

/** One QR code per push link: the link itself is the code's text, so any wallet's camera can open it. */
function pushSection(pushLinks: readonly PushLink[]): string {
  const codes = pushLinks
    .map(
      (push, i) => `<figure class="push" data-push-link="${escapeHtml(push.url)}">
<figcaption>${escapeHtml(push.label)}</figcaption>
<div class="qr" id="push-qr-${i}" aria-label="${escapeHtml(`QR code: ${push.label}`)}">${qrSvg(push.url)}</div>
</figure>`,
    )
    .join('\n')
  return `<section id="push" aria-labelledby="push-title">
<h2 id="push-title">Or send it from any wallet</h2>
<p class="muted small">Scan one of these codes: the exact amount and the payment's reference are in it.</p>
${codes}
</section>`
}

const style = `
.merchant{display:flex;gap:12px;align-items:center}
.logo{width:40px;height:40px;border-radius:10px;object-fit:cover;flex:none}
.initial{display:grid;place-items:center;background:var(--accent);color:var(--accent-text);font-weight:700}
.amount{font-size:2rem;font-weight:700;margin:16px 0 4px;letter-spacing:-.01em}
.status{display:inline-block;padding:4px 10px;border-radius:999px;background:var(--bg);border:1px solid var(--border);
font-weight:600;font-size:.9rem;margin:0 0 12px}
.status[data-status=succeeded]{color:var(--ok);border-color:var(--ok)}
.status[data-status=failed],.status[data-status=expired],.status[data-status=cancelled]{color:var(--error);border-color:var(--error)}
.test{background:#fff4d6;color:#6b4e00;border-radius:8px;padding:6px 10px;font-size:.85rem;margin:10px 0 0}
.qr{background:#fff;border-radius:12px;padding:8px;margin:8px auto;max-width:260px}
.qr svg{display:block;width:100%;height:auto}
.center{text-align:center}
.small{font-size:.8rem;margin-top:12px}
.link{word-break:break-all;text-align:center;font-size:.85rem;margin:4px 0 14px}
code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.85em}
.done{text-align:center;font-weight:600;margin:12px 0 4px}
.done[data-status=succeeded]::before{content:"\\2713";display:block;margin:0 auto 8px;width:56px;height:56px;line-height:56px;
border-radius:50%;background:var(--ok);color:#fff;font-size:1.8rem}
.push{margin:12px 0 0}
.push figcaption{text-align:center;font-weight:600;font-size:.9rem;overflow-wrap:anywhere}
#push h2{font-size:1rem;margin:18px 0 4px;text-align:center}
.return{display:block;text-align:center;margin-top:12px;color:var(--accent);font-weight:600}
`

function script(config: string): string {
  return `(function(){
var cfg=${config};
var statusEl=document.getElementById('status'),tx=document.getElementById('tx'),txid=document.getElementById('txid');
var expires=document.getElementById('expires'),ret=document.getElementById('return'),pending=document.getElementById('pending');
var done=document.getElementById('done'),doneText=document.getElementById('done-text'),copy=document.getElementById('copy');
if(copy)copy.addEventListener('click',function(){
  if(navigator.clipboard)navigator.clipboard.writeText(cfg.link).then(function(){copy.textContent='Link copied'},function(){});
});
function render(s){
  statusEl.textContent=cfg.labels[s.status]||s.status;statusEl.setAttribute('data-status',s.status);
  if(s.txId){txid.textContent=s.txId;tx.hidden=false}
  if(s.isFinal){
    if(pending)pending.remove();
    doneText.textContent=cfg.finalTexts[s.status]||'';done.setAttribute('data-status',s.status);done.hidden=false;
    if(cfg.checkout){ret.href=s.status==='succeeded'?cfg.checkout.successUrl:cfg.checkout.errorUrl;ret.textContent='Return to the merchant';ret.hidden=false}
  }
}
function tick(){
  if(cfg.isFinal||!expires)return;
  var left=cfg.expiresAt-Math.floor(Date.now()/1000);
  expires.textContent=left>0?'Expires in '+Math.floor(left/60)+':'+String(left%60).padStart(2,'0'):'';
}
if(cfg.isFinal&&cfg.checkout)render(cfg);
setInterval(tick,1000);tick();
function poll(){
  fetch(cfg.statusUrl,{headers:{accept:'application/json'},cache:'no-store'}).then(function(r){return r.ok?r.json():null}).then(function(s){
    if(!s){setTimeout(poll,3000);return}
    cfg.isFinal=s.isFinal;render(s);
    if(!s.isFinal)setTimeout(poll,s.pollInMs||1000);
  },function(){setTimeout(poll,3000)});
}
if(!cfg.isFinal)setTimeout(poll,1000);
})();`
}
