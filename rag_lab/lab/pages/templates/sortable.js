document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('thead th').forEach(function (th) {
    th.addEventListener('click', function () {
      var col = th.cellIndex, body = table.tBodies[0], asc = th.dataset.dir !== 'asc';
      table.querySelectorAll('thead th').forEach(function (h) { delete h.dataset.dir; });
      th.dataset.dir = asc ? 'asc' : 'desc';
      var key = function (row) {
        var cell = row.cells[col];
        return cell.dataset.v !== undefined ? parseFloat(cell.dataset.v) : cell.textContent.trim();
      };
      Array.from(body.rows).sort(function (a, b) {
        var x = key(a), y = key(b);
        var c = (typeof x === 'number' && typeof y === 'number')
          ? ((isNaN(x) ? Infinity : x) - (isNaN(y) ? Infinity : y)) : String(x).localeCompare(String(y));
        return asc ? c : -c;
      }).forEach(function (row) { body.appendChild(row); });
    });
  });
});
