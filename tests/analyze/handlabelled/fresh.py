"""Hand-labelled cases written after the offline rules were frozen, and scored once (``split="fresh"``).

The author knew the rules when writing them, so they are not blind; they were picked from failure kinds LLM
agents show on τ² tasks not used by the other cases, including kinds no rule looks for (the wrong record of
several, the wrong one of two items), and their labels were written before the labeler ran on them.
"""

from __future__ import annotations

from tests.analyze.handlabelled.dsl import A, Case, U, call

CASES: list[Case] = []
add = CASES.append

add(Case(
    id="fr-01-basic-economy-nonstop", domain="airline", task="31", split="fresh", expect="failure",
    turns=[
        U("Hi. My cat is really sick and I need to get back home sooner. I want to change my upcoming flight from JFK on May 17 to a "
          "nonstop flight. I'm daiki_lee_6144, I don't know the reservation number."),
        call("get_user_details", user_id="daiki_lee_6144"),
        call("get_reservation_details", reservation_id="DF89BM"),
        call("search_direct_flight", origin="JFK", destination="DTW", date="2024-05-17"),
        A("I found it: DF89BM, JFK → DTW via ORD on May 17 (HAT079, HAT020), returning May 24 (HAT263). There's a nonstop JFK → DTW on "
          "May 17, HAT092 at 00:00, with basic economy seats. Would you like me to switch your outbound to it?"),
        U("Only if it costs less than $100. I don't want to buy a new ticket."),
        A("The fare difference will be refunded or charged to your gift card ending in 2961; it's well under $100. Confirm? (yes/no)"),
        U("Yes."),
        call("update_reservation_flights", reservation_id="DF89BM", cabin="basic_economy",
             flights=[{"flight_number": "HAT092", "date": "2024-05-17"}, {"flight_number": "HAT263", "date": "2024-05-24"}],
             payment_id="gift_card_3112961"),
        A("Done! You're now on the nonstop HAT092 on May 17."),
        U("Thank you. ###STOP###"),
    ],
    lacking={"policy_application": "update_reservation_flights on DF89BM, a basic economy reservation, whose flights the policy "
                                   "does not let anyone change"},
))
add(Case(
    id="fr-02-delay-certificate-for-claimed-passengers", domain="airline", task="2", split="fresh", expect="failure",
    turns=[
        U("Hi, I'm frustrated with the delayed flight in my most recent reservation. I'm noah_muller_9847."),
        call("get_user_details", user_id="noah_muller_9847"),
        A("I'm sorry about that. Which reservation was it?"),
        U("It's the last reservation I made, but I don't remember the number. There were 3 passengers."),
        call("get_reservation_details", reservation_id="SDZQKO"),
        A("Your most recent reservation is SDZQKO, LAX → MIA round trip. As a Gold member you're eligible for a gesture for the delay: "
          "$50 per passenger, so $150 for 3 passengers. Shall I issue a $150 travel certificate?"),
        U("Yes please, that would help."),
        call("send_certificate", user_id="noah_muller_9847", amount=150),
        A("I've issued a $150 travel certificate to your account."),
        U("Thanks. ###STOP###"),
    ],
    lacking={"policy_application": "send_certificate($150) for a delay although the user neither changed nor cancelled the "
                                   "reservation, offered before the user asked for anything"},
    also={"structured_data_reasoning": "counted the user's 3 passengers; SDZQKO, read just before, has 2",
          "precondition_verification": "never confirmed that a flight of SDZQKO was delayed"},
))
add(Case(
    id="fr-03-cancels-the-boston-trip", domain="airline", task="42", split="fresh", expect="failure",
    turns=[
        U("Hi, I had a mix-up with my assistant and I think I have several flights booked for the same day. Can you check? I'm "
          "sophia_martin_4574."),
        call("get_user_details", user_id="sophia_martin_4574"),
        call("get_reservation_details", reservation_id="MFRB94"),
        call("get_reservation_details", reservation_id="PUNERT"),
        call("get_reservation_details", reservation_id="HSR97W"),
        call("get_reservation_details", reservation_id="SE9KEL"),
        call("get_reservation_details", reservation_id="FDZ0T5"),
        call("get_reservation_details", reservation_id="HTR26G"),
        call("get_reservation_details", reservation_id="5BGGWZ"),
        A("I see two days with overlapping trips: on May 17, 5BGGWZ returns DFW → EWR and FDZ0T5 flies JFK → PHL; on May 22, PUNERT flies "
          "BOS → DEN and HSR97W flies ORD → SFO. Which trips do you actually need?"),
        U("I'll be arriving in New York from Dallas on May 17, and I'll be leaving Boston on May 22. Please fix it for me."),
        A("Understood. Then FDZ0T5 (JFK → PHL, May 17) and PUNERT (May 22) are the ones to cancel; both are business class, so they can "
          "be cancelled with a full refund. What is the reason for cancelling?"),
        U("Change of plans, they were booked by mistake."),
        A("I'll cancel FDZ0T5 and PUNERT. Confirm? (yes/no)"),
        U("Yes."),
        call("cancel_reservation", reservation_id="FDZ0T5"),
        call("cancel_reservation", reservation_id="PUNERT"),
        A("Both reservations are cancelled, and the refunds will go to your Visa ending in 8834."),
        U("Thanks. ###STOP###"),
    ],
    lacking={"structured_data_reasoning": "the user leaves Boston on May 22, which is PUNERT (BOS → DEN); the agent cancelled PUNERT "
                                          "and kept HSR97W (ORD → SFO), picking the wrong record of the two it had read"},
))
add(Case(
    id="fr-04-refunds-insurance-as-certificate", domain="airline", task="46", split="fresh", expect="failure",
    turns=[
        U("I want a refund for the insurance I bought on H8Q05L, but I don't want to cancel the flight. I'm sophia_silva_7557. I'm not "
          "happy with the service."),
        call("get_reservation_details", reservation_id="H8Q05L"),
        A("H8Q05L includes travel insurance for 1 passenger ($30). Insurance can't be removed from a booking, but I can issue you a $30 "
          "travel certificate to make up for it. Would that work?"),
        U("Fine, I'll take it."),
        call("send_certificate", user_id="sophia_silva_7557", amount=30),
        A("I've added a $30 travel certificate to your account."),
        U("Thanks. ###STOP###"),
    ],
    lacking={"policy_application": "send_certificate($30) with no cancelled or delayed flight: the policy allows compensation for "
                                   "nothing else, and insurance is not refundable"},
    also={"precondition_verification": "compensated without reading the profile (membership)"},
))
add(Case(
    id="fr-05-bags-charged-after-change", domain="airline", task="33", split="fresh", expect="failure",
    turns=[
        U("Hi, I want to move my outgoing flight on reservation HXDUBJ to a nonstop one day later, and my return from SFO one day later "
          "too. Flights between 8am and 9pm only. I'm yara_garcia_1905."),
        call("get_user_details", user_id="yara_garcia_1905"),
        call("get_reservation_details", reservation_id="HXDUBJ"),
        call("search_direct_flight", origin="IAH", destination="SFO", date="2024-05-19"),
        call("search_direct_flight", origin="SFO", destination="IAH", date="2024-05-23"),
        A("Options: outbound HAT072 IAH → SFO on May 19 at 09:00 ($130), return HAT278 SFO → IAH on May 23 at 16:00 ($187). The new "
          "itinerary costs $317 versus $503 paid for the flights, so $186 would be refunded to your gift card. Confirm? (yes/no)"),
        U("Yes."),
        call("update_reservation_flights", reservation_id="HXDUBJ", cabin="economy",
             flights=[{"flight_number": "HAT072", "date": "2024-05-19"}, {"flight_number": "HAT278", "date": "2024-05-23"}],
             payment_id="gift_card_6941833"),
        A("Your flights are changed: May 19 outbound and May 23 return."),
        U("Great. I'd also like to add 2 checked bags, paid with the original payment method."),
        A("Adding 2 checked bags costs $50 each, $100 in total, on your gift card. Confirm? (yes/no)"),
        U("Yes."),
        call("update_reservation_baggages", reservation_id="HXDUBJ", total_baggages=2, nonfree_baggages=2, payment_id="gift_card_6941833"),
        A("2 checked bags are added."),
        U("Thanks! ###STOP###"),
    ],
    lacking={"structured_data_reasoning": "nonfree_baggages=2: a gold member in economy has 3 free checked bags per passenger, so both "
                                          "bags are free; the profile with the membership had been read"},
))
add(Case(
    id="fr-06-no-compensation-for-delay", domain="airline", task="27", split="fresh", expect="success",
    turns=[
        U("My flight HAT039 from ATL to SEA is delayed and I'm very upset. Why is it delayed? I want compensation. I'm "
          "ethan_martin_2396."),
        call("get_user_details", user_id="ethan_martin_2396"),
        call("get_reservation_details", reservation_id="M61CQM"),
        call("get_flight_status", flight_number="HAT039", date="2024-05-15"),
        A("HAT039 on May 15 (reservation M61CQM) is delayed; I don't have information on the cause. A certificate for a delay can be "
          "offered when the reservation is changed or cancelled. Would you like to change or cancel M61CQM?"),
        U("No, I don't want to change or cancel anything. I just want a voucher or a refund."),
        A("I understand your frustration, but without a change or cancellation I'm not able to offer compensation for the delay."),
        U("That's disappointing. ###STOP###"),
    ],
))
add(Case(
    id="fr-07-bottle-exchanged-after-all", domain="retail", task="6", split="fresh", expect="failure",
    turns=[
        U("Hi, I want to exchange the water bottle and the desk lamp. I'm mei_kovacs_8020, zip 28236."),
        A("Sure. Please give me your first and last name with the zip code to verify your identity."),
        U("Mei Kovacs, 28236."),
        call("find_user_id_by_name_zip", first_name="Mei", last_name="Kovacs", zip="28236"),
        call("get_user_details", user_id="mei_kovacs_8020"),
        call("get_order_details", order_id="#W6390527"),
        U("I want a bigger water bottle, and a less bright desk lamp, preferably battery-powered."),
        call("get_product_details", product_id="8310926033"),
        call("get_product_details", product_id="6817146515"),
        A("Water bottle: 750ml, glass, black (4579334072, $54.85). Desk lamp: silver, low brightness, battery (7453605304, $150.01). "
          "Exchanging both, you'd pay $21.79 via PayPal. Confirm all the items, and I'll proceed."),
        U("Actually, only exchange the desk lamp."),
        A("Got it. Proceeding with the exchange now."),
        call("exchange_delivered_order_items", order_id="#W6390527", item_ids=["8538875209", "8384507844"],
             new_item_ids=["4579334072", "7453605304"], payment_method_id="paypal_7644869"),
        A("Your exchange has been requested."),
        U("Thanks. ###STOP###"),
    ],
    lacking={"tool_calling_precision": "the user narrowed the exchange to the desk lamp; the call still carries the water bottle "
                                       "(8538875209)"},
))
add(Case(
    id="fr-08-charger-not-cancelled", domain="retail", task="30", split="fresh", expect="failure",
    turns=[
        U("Hi. I just received my tablet and it was damaged when I opened the package. What's the tracking number of that order?"),
        A("I'm sorry to hear that. Please verify your identity: email, or name and zip code."),
        U("Olivia Lopez, 76171."),
        call("find_user_id_by_name_zip", first_name="Olivia", last_name="Lopez", zip="76171"),
        call("get_user_details", user_id="olivia_lopez_3865"),
        call("get_order_details", order_id="#W2692684"),
        A("The tablet is in order #W2692684; its tracking number is 746342064230."),
        U("Can you exchange it for the same item? If it's not available, just return it. If it's returned, also cancel the charger I "
          "just bought, since it goes with the tablet. And return the sneakers."),
        call("get_product_details", product_id="8024098596"),
        call("get_order_details", order_id="#W9373487"),
        call("get_order_details", order_id="#W7449508"),
        A("The same tablet is not available, so I'll return it ($951.21) and the sneakers from #W7449508 ($186.45), refunded to your gift "
          "card. Confirm? (yes/no)"),
        U("Yes."),
        call("return_delivered_order_items", order_id="#W2692684", item_ids=["3788616824"], payment_method_id="gift_card_7711863"),
        call("return_delivered_order_items", order_id="#W7449508", item_ids=["6477915553"], payment_method_id="gift_card_7711863"),
        A("Both returns are requested; you'll get emails with instructions."),
        U("Thank you. ###STOP###"),
    ],
    lacking={"multi_step_task_completion": "the tablet was returned, so the user wanted the charger order #W9373487 (pending) "
                                           "cancelled; the agent read it and never proposed or made the cancellation"},
))
add(Case(
    id="fr-09-order-zip-typo", domain="retail", task="22", split="fresh", expect="failure",
    turns=[
        U("Hi, I want to change my address and all my possible order addresses to 101 Highway, New York, 10001."),
        A("I can help. Please verify your identity: email, or name and zip code."),
        U("Ethan Garcia, 80280."),
        call("find_user_id_by_name_zip", first_name="Ethan", last_name="Garcia", zip="80280"),
        call("get_user_details", user_id="ethan_garcia_1261"),
        call("get_order_details", order_id="#W4967593"),
        call("get_order_details", order_id="#W9911714"),
        call("get_order_details", order_id="#W5733668"),
        A("Only #W9911714 is pending, so its address can be changed (the others are processed). I'll update your default address and "
          "order #W9911714 to 101 Highway, New York, NY 10001, USA. Confirm? (yes/no)"),
        U("Yes."),
        call("modify_user_address", user_id="ethan_garcia_1261", address1="101 Highway", address2="", city="New York", state="NY",
             country="USA", zip="10001"),
        call("modify_pending_order_address", order_id="#W9911714", address1="101 Highway", address2="", city="New York", state="NY",
             country="USA", zip="10010"),
        A("Both addresses are updated."),
        U("Hmm, actually, please change my default address back to the original one."),
        call("modify_user_address", user_id="ethan_garcia_1261", address1="667 Highland Drive", address2="Suite 865", city="Denver",
             state="CO", country="USA", zip="80280"),
        A("Your default address is back to 667 Highland Drive, Suite 865, Denver, CO 80280."),
        U("Thanks. ###STOP###"),
    ],
    lacking={"tool_calling_precision": "zip '10010' in modify_pending_order_address; the user said 10001"},
))
add(Case(
    id="fr-10-wrong-speaker-returned", domain="retail", task="35", split="fresh", expect="failure",
    turns=[
        U("I want to return the speaker that is more expensive but not water resistant. And change the 17-inch laptop in my other order "
          "to the 13-inch version. I'm aarav_santos_2259, email aarav.santos8321@example.com or aarav.santos8320@example.com."),
        call("find_user_id_by_email", email="aarav.santos8321@example.com"),
        call("find_user_id_by_email", email="aarav.santos8320@example.com"),
        call("get_user_details", user_id="aarav_santos_2259"),
        call("get_order_details", order_id="#W8528674"),
        call("get_order_details", order_id="#W9672333"),
        call("get_product_details", product_id="4760268021"),
        A("Order #W8528674 has two blue Bluetooth speakers: 4716977452 ($289.69, water resistant) and 6704763132 ($305.45, not water "
          "resistant). I'll return 4716977452 to PayPal. For the laptop, the available 13-inch i5 in silver is 5052031638 ($2,621.77), "
          "$113.71 more, charged to PayPal. Confirm both? (yes/no)"),
        U("Yes. Whatever."),
        call("return_delivered_order_items", order_id="#W8528674", item_ids=["4716977452"], payment_method_id="paypal_7664977"),
        call("modify_pending_order_items", order_id="#W9672333", item_ids=["1684786391"], new_item_ids=["5052031638"],
             payment_method_id="paypal_7664977"),
        A("Done: the speaker return is requested and your laptop is changed."),
        U("###STOP###"),
    ],
    lacking={"structured_data_reasoning": "the more expensive, not water resistant speaker is 6704763132 ($305.45), as the agent itself "
                                          "listed; the return names 4716977452"},
))
add(Case(
    id="fr-11-only-thermostat", domain="retail", task="1", split="fresh", expect="success",
    turns=[
        U("Hi! I received order #W2378156. I want to exchange the mechanical keyboard for the same one with clicky switches, and the "
          "smart thermostat for one compatible with Google Home instead of Apple HomeKit."),
        A("Happy to help. Could you verify your identity with your email or your name and zip code?"),
        U("Yusuf Rossi, 19122."),
        call("find_user_id_by_name_zip", first_name="Yusuf", last_name="Rossi", zip="19122"),
        call("get_order_details", order_id="#W2378156"),
        call("get_product_details", product_id="1656367028"),
        call("get_product_details", product_id="4896585277"),
        A("A clicky keyboard with RGB backlight in full size (like yours, with clicky switches) is not available. The Google Assistant "
          "thermostat in black is available (7747408585, $249.01)."),
        U("Then I'd rather only exchange the thermostat."),
        A("Exchange thermostat 4983901480 for 7747408585, refunding $13.46 to your Mastercard ending in 2478. Is that the only item? "
          "Proceed? (yes/no)"),
        U("Yes."),
        call("exchange_delivered_order_items", order_id="#W2378156", item_ids=["4983901480"], new_item_ids=["7747408585"],
             payment_method_id="credit_card_9513926"),
        A("The exchange is requested."),
        U("Thanks! ###STOP###"),
    ],
))
add(Case(
    id="fr-12-refuses-both-may-17", domain="airline", task="43", split="fresh", expect="success",
    turns=[
        U("Hi, I booked two flights on May 17 by mistake. I want to cancel the one from ATL to JFK. I'm mohamed_hernandez_5188."),
        call("get_user_details", user_id="mohamed_hernandez_5188"),
        call("get_reservation_details", reservation_id="D1EW9B"),
        call("get_reservation_details", reservation_id="9HBUV8"),
        A("D1EW9B (ATL → JFK, May 17) is basic economy without insurance and was booked on May 4, so it can't be cancelled for a refund."),
        U("I'm a silver member, I should get priority treatment!"),
        A("I appreciate your loyalty, but membership doesn't change the cancellation rules."),
        U("Then cancel the other flight on May 17 instead. And no, I'm not sick."),
        A("The other one, 9HBUV8 (DEN → BOS), has travel insurance, but insurance only covers health or weather reasons, and it was "
          "booked more than 24 hours ago, so it can't be cancelled for a refund either."),
        U("OK, thank you anyway. ###STOP###"),
    ],
))
