"""The ToolSandbox phone world: seeded contacts, messages, reminders and settings; the offline tools; dates.

An env writes ``from trace_env.kits import toolsandbox as phone`` and then:

- builds the phone with ``world = phone.PhoneWorld(rng, now)`` (``contacts()``, ``messages()``,
  ``reminder()``, ``uuid()``, ``state(settings, contacts, messages, reminders)``);
- inherits ``phone.PhoneTools`` (or one group: ``SettingTools``, ``ContactTools``, ``MessagingTools``,
  ``ReminderTools``, ``UtilityTools``), exposes a subset in ``tool_names``, overrides any one by redefining it;
- reads dates with ``phone.us_holidays(year)``, ``phone.find_holiday(name)``, ``phone.mentions_date(text, day)``,
  ``phone.mentions_time(...)``, ``phone.durations(...)``, ``phone.say_date(day)``.
"""

from trace_env.kits.toolsandbox import dates, tools, world
from trace_env.kits.toolsandbox.dates import *  # noqa: F403
from trace_env.kits.toolsandbox.tools import *  # noqa: F403
from trace_env.kits.toolsandbox.world import *  # noqa: F403

__all__ = sorted({*dates.__all__, *tools.__all__, *world.__all__})
