/* fwkernels' additions to asv's page (asv.html), loaded after flot:
   - a graph's legend lists only the series that have a data point: asv draws one series per
     combination of the selected parameters, measured or not (a framework runs few of the modes
     in the grid);
   - the regressions table names the release of each commit (the ledger's tags). */
(function ($) {
    function hasData(series) {
        return series.data.some(function (point) {
            return point[1] !== null && point[1] !== undefined;
        });
    }

    $.plot.plugins.push({
        name: "fwkernels-legend",
        version: "1.0",
        options: {},
        init: function (plot) {
            plot.hooks.processOptions.push(function (plot, options) {
                var format = options.legend.labelFormatter;
                options.legend.labelFormatter = function (label, series) {
                    if (!hasData(series)) {
                        return null;  // flot leaves a series out of the legend on a null label
                    }
                    return format ? format(label, series) : label;
                };
            });
        }
    });

    function releaseNames() {
        var names = {};
        var main = $.asv && $.asv.main_json;
        if (main && main.tags) {
            $.each(main.tags, function (tag, revision) {
                names[$.asv.get_commit_hash(revision)] = tag;
            });
        }
        return names;
    }

    function nameReleases(root) {
        var names = releaseNames();
        $(root).find("td").each(function () {
            var cell = $(this);
            var hashes = cell.text().match(/^\s*([0-9a-f]{6,40})(?:\.\.([0-9a-f]{6,40}))?\s*$/);
            if (!hashes || cell.find(".fwkernels-release").length) {
                return;
            }
            var tags = [hashes[1], hashes[2]].filter(Boolean).map(function (h) {
                return names[h] || h;
            });
            cell.append($("<div class='fwkernels-release'/>").text(tags.join(" \u2192 ")));
        });
    }

    $(function () {
        var body = document.getElementById("regressions-body");
        if (body) {
            new MutationObserver(function () { nameReleases(body); })
                .observe(body, {childList: true, subtree: true});
        }
    });
})(jQuery);
