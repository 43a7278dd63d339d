"""The product page the benchmark visits: about 3,800 elements, generated, with a little script.

A shop's product page as themes build it: a header with mega-menus, breadcrumbs, a gallery, the
buy box with options, tabs for the description and the specifications, reviews, questions,
related products and a footer. Its script switches the gallery image and the tabs and fills the
mini-cart, so a visit changes the page the way a shopper does. No images or web fonts are
fetched: the page costs the same in every variant, and only the tracker differs.

The tracker goes where its vendor's install instructions put it, in the head:

- `ours`: the stub and the async loader tag (docs/sdk.md, "Installing it on a shop page").
- `sentry`: the SDK bundle as a script tag, then `Sentry.init` with Replay (Sentry's CDN form;
  the npm package is bundled by vendors/build.mjs because it ships no browser bundle).
- `posthog`: PostHog's snippet, which loads `array.js` asynchronously from `api_host`.
"""

from __future__ import annotations

import html
import json

STYLE = """
*{box-sizing:border-box}body{margin:0;font:15px/1.5 system-ui,sans-serif;color:#222}
header{background:#1d2b3a;color:#fff}header a{color:#dfe7ef;text-decoration:none}
.bar{display:flex;gap:18px;padding:10px 24px;align-items:center}
.menus{display:flex;gap:4px;padding:0 24px}.menu{position:relative;padding:8px 12px}
.menu .panel{display:none;position:absolute;top:100%;left:0;background:#fff;color:#222;
  padding:12px;box-shadow:0 4px 16px #0003;z-index:5;width:520px;columns:2}
.menu:hover .panel{display:block}.panel a{display:block;color:#234}
main{max-width:1200px;margin:0 auto;padding:16px 24px}
.crumbs{font-size:13px;color:#667}.product{display:grid;grid-template-columns:1fr 1fr;gap:32px}
.stage{height:440px;border-radius:8px;background:linear-gradient(135deg,#9bc,#246)}
.stage.alt1{background:linear-gradient(135deg,#cb9,#642)}
.stage.alt2{background:linear-gradient(135deg,#9cb,#264)}
.thumbs{display:flex;gap:8px;margin-top:8px}
.thumbs button{width:64px;height:64px;border:2px solid #ccd;border-radius:6px;background:#eef}
.thumbs button.on{border-color:#246}.price{font-size:28px;font-weight:700}
.swatches label{display:inline-block;margin:4px;padding:6px 10px;border:1px solid #bbc;
  border-radius:16px}.buy{padding:12px 28px;background:#0a7;color:#fff;border:0;
  border-radius:6px;font-size:16px}.tabs{margin-top:32px;border-bottom:1px solid #ccd}
.tabs button{padding:10px 16px;border:0;background:none}
.tabs button.on{border-bottom:3px solid #246}
.pane{display:none;padding:16px 0}.pane.on{display:block}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #eee;padding:6px;
  text-align:left}.review{border-bottom:1px solid #eee;padding:12px 0}
.stars span{color:#e9a400}.review .meta{font-size:13px;color:#778}
.grid{display:grid;grid-template-columns:repeat(4,1fr);gap:16px}
.card{border:1px solid #e3e6ea;border-radius:8px;padding:10px}
.card .img{height:120px;border-radius:6px;background:linear-gradient(#dde,#aab)}
footer{background:#f2f4f6;margin-top:40px;padding:24px;display:grid;
  grid-template-columns:repeat(6,1fr);gap:12px;font-size:13px}footer a{display:block;color:#345}
.mini{position:fixed;right:16px;top:64px;background:#fff;border:1px solid #ccd;
  padding:8px;width:220px;display:none}.mini.on{display:block}
"""

SCRIPT = """
(() => {
  const stage = document.getElementById('stage');
  document.querySelectorAll('.thumbs button').forEach((button, index) => {
    button.addEventListener('click', () => {
      document.querySelectorAll('.thumbs button').forEach((b) => b.classList.remove('on'));
      button.classList.add('on');
      stage.className = 'stage' + (index % 3 ? ' alt' + (index % 3) : '');
      stage.setAttribute('aria-label', 'Image ' + (index + 1));
    });
  });
  document.querySelectorAll('.tabs button').forEach((button) => {
    button.addEventListener('click', () => {
      document.querySelectorAll('.tabs button, .pane').forEach((e) => e.classList.remove('on'));
      button.classList.add('on');
      document.getElementById(button.dataset.pane).classList.add('on');
    });
  });
  const mini = document.getElementById('mini');
  let items = 0;
  document.getElementById('buy').addEventListener('click', () => {
    items += Number(document.getElementById('qty').value || 1);
    const line = document.createElement('li');
    line.textContent = 'Stoneware mug, blue x' + document.getElementById('qty').value;
    document.getElementById('mini-lines').appendChild(line);
    document.getElementById('cart-count').textContent = String(items);
    mini.classList.add('on');
  });
  document.getElementById('more-reviews').addEventListener('click', () => {
    const list = document.getElementById('reviews');
    for (let i = 0; i < 5; i++) list.appendChild(list.children[i].cloneNode(true));
  });
})();
"""

WORDS = ("glaze stoneware handle rim kiln colour cobalt speckled sturdy dishwasher microwave "
         "coffee tea morning gift weight balance matte glossy studio batch potter clay fired "
         "shelf holds hands warm deep blue saucer cup mug ounces everyday favourite").split()


def _text(n: int, words: int) -> str:
    return " ".join(WORDS[(n * 7 + i * 3) % len(WORDS)] for i in range(words)).capitalize()


def _header() -> str:
    menus = []
    for m in range(8):
        links = "".join(f'<a href="/c/{m}/{k}">{_text(m + k, 2)}</a>' for k in range(20))
        menus.append(f'<div class="menu"><a href="/c/{m}">{_text(m, 1)}</a>'
                     f'<div class="panel">{links}</div></div>')
    return (
        '<header><div class="bar"><a href="/" class="logo"><strong>Kiln &amp; Co</strong></a>'
        '<form role="search"><input type="search" name="q" placeholder="Search">'
        '<button>Search</button></form><a href="/account">Account</a>'
        '<a href="/cart">Cart (<span id="cart-count">0</span>)</a></div>'
        f'<nav class="menus">{"".join(menus)}</nav></header>'
        '<div class="mini" id="mini"><strong>In your cart</strong><ul id="mini-lines"></ul>'
        '<a href="/cart">View cart</a></div>')


def _buy_box() -> str:
    thumbs = "".join(f'<button type="button" aria-label="Image {k + 1}"'
                     f'{" class=on" if k == 0 else ""}></button>' for k in range(8))
    colours = "".join(f'<label><input type="radio" name="colour" value="c{k}"'
                      f'{" checked" if k == 0 else ""}> {_text(k, 1)}</label>' for k in range(6))
    sizes = "".join(f'<option value="s{k}">{8 + 4 * k} oz</option>' for k in range(5))
    bullets = "".join(f"<li>{_text(k, 8)}</li>" for k in range(6))
    return (
        '<section class="product"><div><div class="stage" id="stage" role="img" '
        f'aria-label="Image 1"></div><div class="thumbs">{thumbs}</div></div>'
        '<div><h1>Stoneware mug, cobalt blue</h1><div class="stars">'
        + "".join("<span>&#9733;</span>" for _ in range(5)) +
        ' <a href="#reviews">128 reviews</a></div><p class="price">&euro;24.00</p>'
        f"<ul>{bullets}</ul><form onsubmit=\"return false\"><div class=\"swatches\">{colours}"
        f'</div><label>Size <select name="size">{sizes}</select></label> '
        '<label>Quantity <input id="qty" type="number" min="1" value="1" size="3"></label> '
        '<button class="buy" id="buy" type="button">Add to cart</button></form>'
        '<p>Free delivery over &euro;50. Ships in 2 days.</p></div></section>')


def _tabs() -> str:
    paragraphs = "".join(f"<p>{_text(k, 40)}</p>" for k in range(12))
    specs = "".join(f"<tr><th>{_text(k, 2)}</th><td>{_text(k + 3, 4)}</td></tr>"
                    for k in range(120))
    reviews = []
    for k in range(155):
        stars = "".join(f"<span>{'&#9733;' if s < 4 + k % 2 else '&#9734;'}</span>"
                        for s in range(5))
        reviews.append(
            f'<article class="review"><div class="stars">{stars}</div>'
            f"<h4>{_text(k, 4)}</h4><p>{_text(k, 30)}</p>"
            f'<div class="meta"><span>Reviewer {k}</span> &middot; <time>2026-0{1 + k % 9}-1'
            f'{k % 10}</time> &middot; <button type="button">Helpful ({k % 13})</button>'
            "<button type=\"button\">Report</button></div></article>")
    questions = "".join(
        f'<details><summary>{_text(k, 7)}?</summary><p>{_text(k + 1, 20)}</p>'
        f'<p class="meta"><em>Answered by the shop</em></p></details>' for k in range(60))
    return (
        '<nav class="tabs"><button class="on" data-pane="p-desc">Description</button>'
        '<button data-pane="p-specs">Specifications</button>'
        '<button data-pane="p-reviews">Reviews</button>'
        '<button data-pane="p-qa">Questions</button></nav>'
        f'<section class="pane on" id="p-desc">{paragraphs}</section>'
        f'<section class="pane" id="p-specs"><table><tbody>{specs}</tbody></table></section>'
        f'<section class="pane on" id="p-reviews"><h2>Reviews</h2><div id="reviews">'
        f'{"".join(reviews)}</div><button type="button" id="more-reviews">More reviews'
        "</button></section>"
        f'<section class="pane" id="p-qa"><h2>Questions</h2>{questions}</section>')


def _cards(title: str, count: int, offset: int) -> str:
    cards = "".join(
        f'<article class="card"><a href="/p/{offset + k}"><div class="img"></div>'
        f"<h3>{_text(offset + k, 3)}</h3></a><p class=\"price\"><small>&euro;{12 + k}.00"
        f'</small></p><div class="stars"><span>&#9733;</span><span>&#9733;</span>'
        f'<span>&#9733;</span><span>&#9733;</span></div><button type="button">Add</button>'
        "</article>" for k in range(count))
    return f'<section><h2>{title}</h2><div class="grid">{cards}</div></section>'


def _footer() -> str:
    columns = "".join(
        f"<div><h4>{_text(c, 2)}</h4>"
        + "".join(f'<a href="/f/{c}/{k}">{_text(c + k, 2)}</a>' for k in range(24)) + "</div>"
        for c in range(6))
    return f"<footer>{columns}</footer>"


def tracker_tags(tracker: str, *, service: str = "", public_key: str = "", cdn: str = "",
                 collector: str = "") -> str:
    """The head tags of one tracker, as its install instructions give them."""
    if tracker == "none":
        return ""
    if tracker == "ours":
        return ('<script>window.svc = window.svc || function () '
                '{ (svc.q = svc.q || []).push(arguments); };</script>\n'
                f'<script async src="{service}/sdk/v1/loader.js?key={public_key}"></script>')
    if tracker == "sentry":
        dsn = collector.replace("://", "://0123456789abcdef0123456789abcdef@") + "/1"
        options = {"dsn": dsn, "replaysSessionSampleRate": 1.0, "replaysOnErrorSampleRate": 1.0}
        return (f'<script src="{cdn}/vendors/sentry.js" crossorigin="anonymous"></script>\n'
                f"<script>Sentry.init(Object.assign({json.dumps(options)}, "
                "{integrations: [Sentry.replayIntegration()]}));</script>")
    if tracker == "posthog":
        # PostHog's snippet (unminified): a stub that queues calls, and array.js from api_host.
        options = {"api_host": collector, "person_profiles": "identified_only"}
        return (
            "<script>!function(t,e){var o,n,p,r;e.__SV||(window.posthog=e,e._i=[],"
            "e.init=function(i,s,a){function g(t,e){var o=e.split('.');2==o.length&&"
            "(t=t[o[0]],e=o[1]),t[e]=function(){t.push([e].concat(Array.prototype.slice"
            ".call(arguments,0)))}}(p=t.createElement('script')).type='text/javascript',"
            "p.crossOrigin='anonymous',p.async=!0,p.src=s.api_host+'/static/array.js',"
            "(r=t.getElementsByTagName('script')[0]).parentNode.insertBefore(p,r);var u=e;"
            "for(void 0!==a?u=e[a]=[]:a='posthog',u.people=u.people||[],o='init capture "
            "register identify reset get_distinct_id startSessionRecording "
            "stopSessionRecording opt_in_capturing opt_out_capturing'.split(' '),n=0;"
            "n<o.length;n++)g(u,o[n]);e._i.push([i,s,a])},e.__SV=1)}"
            "(document,window.posthog||[]);\n"
            f"posthog.init('phc_bench', {json.dumps(options)});</script>")
    raise ValueError(tracker)


def product_page(head_tags: str) -> str:
    """The whole page, with the tracker's tags in its head."""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>Stoneware mug, cobalt blue | Kiln &amp; Co</title>\n{head_tags}\n"
        f"<style>{STYLE}</style></head><body>{_header()}<main>"
        '<nav class="crumbs"><a href="/">Home</a> / <a href="/c/0">Kitchen</a> / '
        f"<span>{html.escape('Mugs & cups')}</span></nav>{_buy_box()}{_tabs()}"
        f"{_cards('Related products', 36, 100)}{_cards('Recently viewed', 8, 200)}</main>"
        f"{_footer()}<script>{SCRIPT}</script></body></html>")
