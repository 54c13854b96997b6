"""rule_calendar: a session filter written as rules (``weekday``, ``hour``, a lagged hour
and the calendar inside an indicator), so the simulator and PTX tests cover rules whose
series come from the bars' time stamps. Registered on import."""

from barsweep.engine import register
from barsweep.engine.rules import Rule, compile_rule

RULE = Rule("weekday < 5 and hour >= start and close > sma(close, period)",
            "hour >= stop or hour[1] < start or close < sma(close, period)",
            short_entry="weekday == 4 and sma(hour, 3) > start and close < sma(close, period)",
            short_exit="hour >= stop or close > sma(close, period)",
            name="rule_calendar")

STRATEGY = register(compile_rule(RULE, {"period": "int", "start": "int", "stop": "int"}))
