// The shop the verdict end-to-end tests render: a React 18 single-page app as a site without a
// build step writes one (React.createElement over the UMD builds). Its routes: /c/shop, the
// product list; /c/shop/p/:id, a product; and, in the version deployed later (READY_ROUTE set
// by the test origin), /c/ready/:id. Any other path is its NotFound page, which declares 404 to
// prerenderers. Its data come from the JSON API of its own origin, named by the config script.
(function () {
  "use strict";
  var READY_ROUTE = false;
  // A broken config deploy (SHOP without endpoints) throws here, before anything mounts.
  var api = window.SHOP.endpoints.products;
  var h = React.createElement;

  function useData(url) {
    var s = React.useState({ state: "loading" });
    var set = s[1];
    React.useEffect(function () {
      fetch(url, { headers: { Accept: "application/json" } })
        .then(function (r) {
          if (!r.ok) throw new Error("HTTP " + r.status);
          return r.json();
        })
        .then(
          function (data) { set({ state: "ok", data: data }); },
          function (err) { set({ state: "error", error: String(err) }); }
        );
    }, [url]);
    return s[0];
  }

  function Status(props) {
    if (props.d.state === "loading") return h("p", { className: "loading" }, "Loading…");
    return h("div", { className: "error" }, h("h2", null, "Something went wrong"), h("p", null, "Please try again later."));
  }

  function List() {
    var d = useData(api);
    if (d.state !== "ok") return h(Status, { d: d });
    return h("section", null,
      h("h1", null, "Products"),
      h("ul", null, d.data.map(function (p) {
        return h("li", { key: p.id }, h("a", { href: "/c/shop/p/" + p.id }, p.name), " ", h("span", null, p.price));
      })));
  }

  function Product(props) {
    var d = useData(api + "/" + props.id);
    React.useEffect(function () {
      if (d.state === "ok") document.title = d.data.name + " | Kettle Shop";
    }, [d]);
    if (d.state !== "ok") return h(Status, { d: d });
    return h("article", null,
      h("h1", null, d.data.name),
      h("p", { className: "price" }, d.data.price),
      h("p", null, d.data.description));
  }

  function Ready(props) {
    return h("section", null, h("h1", null, "Order " + props.id + " is ready"), h("p", null, "Collect it at the counter."));
  }

  function NotFound() {
    React.useEffect(function () {
      var m = document.createElement("meta");
      m.name = "prerender-status-code";
      m.content = "404";
      document.head.appendChild(m);
    }, []);
    return h("section", null, h("h1", null, "Not found"), h("p", null, "No page of the shop has this address."));
  }

  function App() {
    var path = window.location.pathname;
    var m;
    var page;
    if (path === "/c/shop") page = h(List);
    else if ((m = /^\/c\/shop\/p\/(\d+)$/.exec(path))) page = h(Product, { id: m[1] });
    else if (READY_ROUTE && (m = /^\/c\/ready\/(\d+)$/.exec(path))) page = h(Ready, { id: m[1] });
    else page = h(NotFound);
    return h("div", null, h("header", null, h("a", { href: "/c/shop" }, "Kettle Shop")), h("main", null, page));
  }

  ReactDOM.createRoot(document.getElementById("root")).render(h(App));
})();
