// An Express site behind the unmodified prerender-node middleware, pointed at freshq's crawler
// listener. FRESHQ_SERVE is the listener's URL, FRESHQ_SERVE_TOKEN the token the middleware
// sends, PORT the site's port. GET /__hits?path=P says how often the site itself served P.
const express = require('express');
const prerender = require('prerender-node');

const hits = {};
const app = express();
app.get('/__hits', (req, res) => res.json({ hits: hits[req.query.path] || 0 }));
if (process.env.FRESHQ_FORWARD_CLIENT) {
  // What README's "Put freshq in front of your site" shows: prerender-node sends no client
  // address, so the app sets X-Real-IP itself (overwriting what the visitor sent) and forwards it.
  app.use((req, res, next) => { req.headers['x-real-ip'] = req.socket.remoteAddress; next(); });
  prerender.set('forwardHeaders', true);
}
app.use(prerender.set('prerenderServiceUrl', process.env.FRESHQ_SERVE).set('prerenderToken', process.env.FRESHQ_SERVE_TOKEN));
app.use((req, res) => {
  hits[req.path] = (hits[req.path] || 0) + 1;
  if (req.path.startsWith('/api/')) {
    // The site's API: JSON, which the middleware does not skip (no file extension).
    return res.json({ path: req.path, name: 'Red shoes' });
  }
  res.type('html');
  if (req.path === '/gone') {
    return res.send('<!doctype html><meta name="prerender-status-code" content="404"><p>gone</p>');
  }
  if (req.path.startsWith('/cached/')) {
    // A page the site lets shared caches keep, as a CDN in front of it would.
    res.set('Cache-Control', 'public, max-age=600');
  }
  if (req.path === '/moved') {
    return res.send('<!doctype html><meta name="prerender-status-code" content="301">' +
      '<meta name="prerender-header" content="Location: https://elsewhere.example/new"><p>moved</p>');
  }
  res.send('<!doctype html><title>' + req.path + '</title><p>site page ' + req.path + ' for ' + (req.get('user-agent') || '') + '</p>');
});
const server = app.listen(Number(process.env.PORT), '127.0.0.1', () => console.log('listening'));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
