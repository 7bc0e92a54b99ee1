"""The machinery every comparison page shares (ours against peers, per direction and dtype):
a spec declares what a study's page shows (:mod:`.spec`), and :func:`.page.context` builds
its tables (:mod:`.tables`, :mod:`.losses`), charts (:mod:`.charts`), targets, observations
and decision card (:mod:`.claims`) from the study's results."""
