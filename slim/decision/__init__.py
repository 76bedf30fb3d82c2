"""The one batch-cap decision of the project: the candidates it judges (`candidates`), Eq. 13 (`rule`),
whether it is settled (`certificate`), the choice across parallel layouts (`layouts`), the SLO bounds
it holds (`slo_limits`) and its probabilities under uncertainty (`scenarios`); `slim advise`,
`slim tune` and the paper's advisor all call these."""
